"""Checkpoints: the policy, the algorithm's state and counters, written atomically.

Separate from parameter serving: the parameter service streams weights to actors many times a
second; checkpoints are for resuming and evaluating, every `checkpoint_interval_s`.

The buffer worker's replay memory goes beside them, in `replay.npz` (numpy arrays, no pickle;
see srl.data.replay_state), written by the buffer worker on the same interval and at exit: one
file, replaced atomically, since a replay memory can be a large part of the machine's memory.

What is trusted: a checkpoint carries the `run_id` of the run that wrote it, and a run loads only
its own (srl.launch.rundir); a state with a NaN or an infinity is never written, nor loaded; a
file that is not a checkpoint, is truncated, or that latest.json names outside checkpoints/ is
passed over, with one line naming it and why, for the newest one that is usable.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from srl.config import ConfigError
from srl.faults import first_nonfinite
from srl.storage import atomic_file, failing_as, write_text_atomic

LATEST = "latest.json"
REPLAY = "replay.npz"
KEEP = 3  # checkpoints kept: a corrupt newest one leaves two to fall back on
CKPT_NAME = re.compile(r"ckpt-(\d+)\.pt")


class CheckpointError(ConfigError):
    """A run directory's checkpoints cannot be used; the message names each file and why."""


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def params_sha256(module: torch.nn.Module) -> str:
    """Hash of the policy's parameters and buffers, in state_dict order (bit-exact)."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def save(
    run_dir: Path, version: int, env_steps: int, policy: torch.nn.Module, algorithm_state: dict,
    run_id: str | None = None,
) -> Path | None:
    """Write checkpoint `version` and point latest.json at it; keep the newest three. A state
    with a non-finite parameter is not written (one line says so): the good ones stay."""
    state = {"version": version, "env_steps": env_steps, "run_id": run_id, "policy": policy.state_dict(),
             "algorithm": algorithm_state}
    bad = first_nonfinite({"policy": state["policy"], "algorithm": algorithm_state})
    if bad is not None:
        print(f"srl: checkpoint of version {version} not written: {bad} is not finite "
              "(the older checkpoints are kept)", file=sys.stderr, flush=True)
        return None
    folder = _made_dir(run_dir)
    path = folder / f"ckpt-{version:08d}.pt"
    # a failed write (full disk, I/O error) leaves no .tmp and the last good checkpoint as it was;
    # it raises storage.WriteFailed, which ends the run rather than restarting the trainer
    with atomic_file(path) as f:
        torch.save(state, f)
    point_latest(run_dir, path, version, env_steps, run_id)
    for old in [p for p in _checkpoint_files(folder) if p != path][KEEP - 1:]:
        old.unlink(missing_ok=True)
    return path


def _made_dir(run_dir: Path) -> Path:
    """The run's checkpoints/, made if need be (a failure to make it is storage.WriteFailed)."""
    folder = checkpoint_dir(run_dir)
    with failing_as(folder):
        folder.mkdir(parents=True, exist_ok=True)
    return folder


def point_latest(run_dir: Path, path: Path, version: int, env_steps: int, run_id: str | None) -> None:
    """latest.json names checkpoint `path` (in the run's checkpoints/), replaced atomically."""
    meta = {"path": Path(path).name, "version": version, "env_steps": env_steps, "run_id": run_id}
    write_text_atomic(checkpoint_dir(run_dir) / LATEST, json.dumps(meta))


def latest_meta(run_dir: Path) -> dict[str, Any] | None:
    """latest.json as written (None when it is missing or not a JSON object)."""
    path = checkpoint_dir(run_dir) / LATEST
    try:
        meta = json.loads(path.read_text()) if path.is_file() else None
    except (ValueError, OSError):
        return None
    return meta if isinstance(meta, dict) else None


def load_latest(
    run_dir: Path, run_id: str | None = None, apply: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any] | None:
    """The newest usable checkpoint: the one latest.json names, else the others, highest version
    first. Usable: a file inside checkpoints/ that torch loads (tensors only) into an srl
    checkpoint, of run `run_id` (a checkpoint or run without an id is taken as any run's), with
    finite parameters, and that `apply` (e.g. load_state_dict) takes without raising. Each one
    passed over is named with its reason on one line on stderr.

    None when the run has no checkpoint at all; CheckpointError when it has some but none is
    usable (a run must not silently start over beside them: its first saves would rotate them away).
    """
    folder = checkpoint_dir(Path(run_dir))
    skipped: list[str] = []
    for path, why in _candidates(folder):
        if why is None:
            state, why = _load(path, run_id, apply)
            if why is None:
                return state
        skipped.append(f"{path.name}: {why.split(' (')[0]}")  # the details are on its own line
        print(f"srl: skipped {path}: {why}", file=sys.stderr, flush=True)
    if skipped:
        raise CheckpointError(f"no usable checkpoint in {folder} ({'; '.join(skipped)})")
    return None


def nothing_to_load(run_dir: Path) -> str:
    """Where `load_latest` found no checkpoint at all, as what it looked for and what it found:
    the part of a one-line refusal that lets the user see which directory and files were meant."""
    folder = checkpoint_dir(Path(run_dir))
    found = "it holds neither" if folder.is_dir() else "it is missing"
    return f"no checkpoint in {folder} (looked for {LATEST} and ckpt-<version>.pt there; {found})"


def set_aside(run_dir: Path, launch: int) -> Path:
    """Move the checkpoint files of `run_dir` (latest.json and ckpt-*.pt, none of which loads) into
    checkpoints/unusable-launch<launch>/: out of reach of loading and of rotation, which would delete
    the newest fresh ones in their favour (their versions are higher), and kept for a look."""
    folder = checkpoint_dir(Path(run_dir))
    aside, n = folder / f"unusable-launch{launch}", 1
    while aside.exists():  # a launch refused after it moved them keeps its number (srl.launch.rundir)
        n += 1
        aside = folder / f"unusable-launch{launch}-{n}"
    with failing_as(aside):
        aside.mkdir()
        for path in [folder / LATEST, *folder.glob("ckpt-*.pt")]:
            if path.is_file() or path.is_symlink():  # a link is moved as it is, never followed
                path.rename(aside / path.name)
    return aside


def load_file(path: Path, apply: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """One named checkpoint (a league snapshot, `srl eval --against FILE`), of any run;
    CheckpointError naming the file and why it cannot be used."""
    state, why = _load(Path(path), None, apply)
    if state is None:
        raise CheckpointError(f"{path}: {why}")
    return state


def _load(
    path: Path, run_id: str | None, apply: Callable[[dict[str, Any]], None] | None
) -> tuple[dict[str, Any] | None, str | None]:
    """(the checkpoint, None) or (None, why it cannot be used)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, not a zip, pickled code: whatever it is, not ours to trust
        return None, f"unreadable ({_one_line(e)})"
    if not isinstance(state, dict) or not {"version", "env_steps", "policy", "algorithm"} <= set(state):
        return None, "not an srl checkpoint"
    theirs = state.get("run_id")
    if run_id is not None and theirs is not None and theirs != run_id:
        return None, f"saved by another run (run_id {theirs}; this run is {run_id})"
    bad = first_nonfinite({"policy": state["policy"], "algorithm": state["algorithm"]})
    if bad is not None:
        return None, f"{bad} is not finite"
    if apply is not None:
        try:
            apply(state)
        except Exception as e:  # a policy or algorithm of other sizes or kind
            return None, f"does not fit this run's policy or algorithm ({_one_line(e)})"
    return {**state, "path": str(path)}, None


def _candidates(folder: Path) -> Iterator[tuple[Path, str | None]]:
    """(path, None) for each checkpoint to try, best first; (path, why) for one refused unread."""
    tried: set[Path] = set()
    latest = folder / LATEST
    if latest.is_file():
        name, why = _latest_name(latest)
        if why is not None:
            yield latest, why
        else:
            target = folder / name
            why = _outside(folder, target, name) or (None if target.is_file() else f"names {name!r}, which is missing")
            yield (latest if why else target), why
            tried.add(target)
    for path in _checkpoint_files(folder):
        if path not in tried:
            yield path, _outside(folder, path, path.name)


def _latest_name(latest: Path) -> tuple[str, str | None]:
    try:
        meta = json.loads(latest.read_text())
    except (ValueError, OSError) as e:
        return "", f"not JSON ({_one_line(e)})"
    if not isinstance(meta, dict) or not isinstance(meta.get("path"), str):
        return "", "has no checkpoint path"
    return meta["path"], None


def _outside(folder: Path, path: Path, shown: str) -> str | None:
    """Why `path` (named `shown`) may not be read: it resolves, through '..', an absolute path
    or a link, outside `folder`. A run's files never point elsewhere: a path that does was forged."""
    if path.resolve().parent != folder.resolve():
        return f"{shown!r} leads outside {folder}: refused"
    return None


def _checkpoint_files(folder: Path) -> list[Path]:
    """ckpt-<version>.pt files, highest version first (a copied directory keeps no mtimes)."""
    found = [(int(m.group(1)), p) for p in folder.glob("ckpt-*.pt") if (m := CKPT_NAME.fullmatch(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def _one_line(error: Exception) -> str:
    """The gist of an error on part of a line: its first two lines, to its first full stop."""
    text = " ".join(" ".join(str(error).strip().splitlines()[:2]).split()) or type(error).__name__
    stop = text.find(". ", 40)
    text = text[: stop + 1] if stop > 0 else text
    return text if len(text) <= 160 else text[:157] + "..."


def save_replay(run_dir: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write the replay state atomically (uncompressed: stored observations rarely compress
    well, and the buffer worker must not stall long)."""
    path = _made_dir(run_dir) / REPLAY
    with atomic_file(path) as f:  # a file object: np.savez would append ".npz" to a path
        np.savez(f, **arrays)  # type: ignore[arg-type]  # the keys are array names, never allow_pickle
    return path


def load_replay(run_dir: Path) -> dict[str, np.ndarray] | None:
    path = checkpoint_dir(run_dir) / REPLAY
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as saved:
        return {name: saved[name] for name in saved.files}
