"""Checkpoints: the policy, the algorithm's state and counters, written atomically.

Separate from parameter serving: the parameter service streams weights to actors many times a
second; checkpoints are for resuming and evaluating, every `checkpoint_interval_s`.

The buffer worker's replay memory goes beside them, in `replay.npz` (numpy arrays, no pickle;
see srl.data.replay_state), written by the buffer worker on the same interval and at exit: one
file, replaced atomically, since a replay memory can be a large part of the machine's memory.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from srl.storage import atomic_file, failing_as, write_text_atomic

LATEST = "latest.json"
REPLAY = "replay.npz"


def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def params_sha256(module: torch.nn.Module) -> str:
    """Hash of the policy's parameters and buffers, in state_dict order (bit-exact)."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def save(run_dir: Path, version: int, env_steps: int, policy: torch.nn.Module, algorithm_state: dict) -> Path:
    folder = checkpoint_dir(run_dir)
    with failing_as(folder):
        folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ckpt-{version:08d}.pt"
    # a failed write (full disk, I/O error) leaves no .tmp and the last good checkpoint as it was;
    # it raises storage.WriteFailed, which ends the run rather than restarting the trainer
    state = {"version": version, "env_steps": env_steps, "policy": policy.state_dict(),
             "algorithm": algorithm_state}
    with atomic_file(path) as f:
        torch.save(state, f)
    meta = {"path": path.name, "version": version, "env_steps": env_steps}
    write_text_atomic(folder / LATEST, json.dumps(meta))
    for old in sorted(folder.glob("ckpt-*.pt"))[:-3]:  # keep the last three
        old.unlink()
    return path


def latest_meta(run_dir: Path) -> dict[str, Any] | None:
    path = checkpoint_dir(run_dir) / LATEST
    return json.loads(path.read_text()) if path.is_file() else None


def load_latest(run_dir: Path) -> dict[str, Any] | None:
    meta = latest_meta(run_dir)
    if meta is None:
        return None
    return torch.load(checkpoint_dir(run_dir) / meta["path"], map_location="cpu", weights_only=True)


def save_replay(run_dir: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write the replay state atomically (uncompressed: stored observations rarely compress
    well, and the buffer worker must not stall long)."""
    folder = checkpoint_dir(run_dir)
    with failing_as(folder):
        folder.mkdir(parents=True, exist_ok=True)
    path = folder / REPLAY
    with atomic_file(path) as f:  # a file object: np.savez would append ".npz" to a path
        np.savez(f, **arrays)
    return path


def load_replay(run_dir: Path) -> dict[str, np.ndarray] | None:
    path = checkpoint_dir(run_dir) / REPLAY
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as saved:
        return {name: saved[name] for name in saved.files}
