"""What every peer runner shares: its virtualenv, a child run under a time limit, the arithmetic.

Each peer lives in its own virtualenv under ~/.cache/srl-peers/<peer> (SRL_PEERS_DIR overrides),
created on first use: torch==2.13.0 first (the CPU build from local disk; an unpinned resolve
would pull a multi-GB CUDA build), then the peer's own pins. A marker file records the versions.
A child runs in its own session, so a timeout or Ctrl-C ends its whole process group (Sample
Factory leaves a resource tracker behind if only the leader dies). Pure helpers (last JSON line,
median, ratios) are unit tested in tests/test_peers_bench.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TORCH_PIN = "torch==2.13.0"
READY_MARKER = ".srl-peer-ready.json"
PEERS_DIR = Path(os.environ.get("SRL_PEERS_DIR", Path.home() / ".cache" / "srl-peers"))
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


class PeerError(RuntimeError):
    """A peer could not be installed or run; the benchmark reports it and goes on."""


def log(msg: str) -> None:
    print(f"[peers] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ pure helpers (tested)


def last_json_line(text: str) -> dict[str, Any] | None:
    """The last line of `text` that parses as a JSON object (children print their result last)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        with contextlib.suppress(json.JSONDecodeError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None


def median_or_none(values: list[Any]) -> float | None:
    """Median of the numeric values (errors and None left out); None when there are none."""
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return round(statistics.median(numbers), 1) if numbers else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator rounded to 3 places, None when either is missing or the divisor is 0."""
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, 3)


def summarize(runs: dict[str, list[Any]], key: str, base: str = "srl") -> dict[str, Any]:
    """Per side: the `key` value of each repeat, their median, and srl's median over the side's.

    `runs` maps a side to its repeats, each a result dict or {"error": ...}. A side with no
    successful repeat keeps its last error so the report says why.
    """
    out: dict[str, Any] = {}
    medians = {}
    for side, repeats in runs.items():
        values = [r.get(key) if isinstance(r, dict) else None for r in repeats]
        medians[side] = median_or_none(values)
        entry: dict[str, Any] = {"median": medians[side], "runs": values}
        errors = [r["error"] for r in repeats if isinstance(r, dict) and r.get("error")]
        skipped = [r["skipped"] for r in repeats if isinstance(r, dict) and r.get("skipped")]
        if errors:
            entry["error"] = errors[-1]
        if skipped:
            entry["skipped"] = skipped[-1]
        out[side] = entry
    for side in runs:
        if side != base and base in medians:
            out[side][f"ratio_{base}_over_peer"] = ratio(medians[base], medians[side])
    return out


# ------------------------------------------------------------------ virtualenvs


def venv_python(name: str) -> Path:
    return PEERS_DIR / name / "bin" / "python"


def ensure_venv(name: str, packages: list[str], probe: list[str]) -> dict[str, str]:
    """Create (first use) the peer's venv; returns the versions of `probe` distributions in it."""
    venv = PEERS_DIR / name
    py = venv_python(name)
    marker = venv / READY_MARKER
    if py.exists() and marker.exists():
        with contextlib.suppress(ValueError, OSError):
            return json.loads(marker.read_text())
    if not py.exists():
        log(f"creating the {name} virtualenv at {venv}")
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
    for step in ([TORCH_PIN], [*packages, TORCH_PIN]):  # torch first and pinned, and kept pinned
        cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check", "-q", *step]
        log("$ " + " ".join(cmd))
        done = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0:
            raise PeerError(f"pip install {' '.join(step)} failed in {venv}: {done.stderr.strip()[-500:]}")
    code = ("import json, importlib.metadata as m; "
            f"print(json.dumps({{p: m.version(p) for p in {probe!r}}}))")
    done = subprocess.run([str(py), "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PeerError(f"{name} venv probe failed: {done.stderr.strip()[-500:]}")
    versions = json.loads(done.stdout)
    marker.write_text(json.dumps(versions))
    return versions


# ------------------------------------------------------------------ child processes


def _kill_group(proc: subprocess.Popen) -> None:
    """TERM the child's session, 5 s grace, then KILL whatever is left of it."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def run_child(cmd: list[str], timeout_s: float, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> dict[str, Any]:
    """Run `cmd` in its own session with a private TMPDIR; its last JSON line, or {"error": ...}.

    The session is killed on timeout, Ctrl-C and after a normal exit (leftover helpers);
    the temporary directory goes with it.
    """
    tmp = Path(tempfile.mkdtemp(prefix="srl-peer-"))
    child_env = {**os.environ, **(env or {}), "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    child_env.setdefault("PEER_TMP", str(tmp))
    log_path = tmp / "child.log"
    started = time.monotonic()
    try:
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(cmd, cwd=cwd or tmp, env=child_env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return {"error": f"timed out after {timeout_s:.0f} s: {_tail(log_path)}"}
            except BaseException:
                _kill_group(proc)
                raise
            _kill_group(proc)
        text = log_path.read_text(errors="replace")
        result = last_json_line(text)
        if proc.returncode != 0 or result is None:
            return {"error": f"exit code {proc.returncode}: {_tail(log_path)}"}
        result.setdefault("launch_to_exit_s", round(time.monotonic() - started, 2))
        return result
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _tail(path: Path, n: int = 600) -> str:
    with contextlib.suppress(OSError):
        return path.read_bytes()[-n:].decode("utf-8", "replace").strip()
    return ""


def repo_first_path() -> str:
    """PYTHONPATH with this checkout first and the caller's entries after it (packages installed
    with pip --target, as on a machine without a virtualenv for srl, stay visible)."""
    return os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)


def run_peer_script(venv: str, script: str, args: list[str], timeout_s: float) -> dict[str, Any]:
    """Run benchmarks/peers/<script> with the venv's python."""
    py = venv_python(venv)
    # PYTHONPATH: Ray's workers unpickle env makers that import _child from this folder
    return run_child([str(py), str(HERE / script), *args], timeout_s, env={"PYTHONPATH": str(HERE)})


def machine_info() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
        "srl_commit": _git_commit(),
    }


def _git_commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or None


def rotated(names: list[str], k: int) -> list[str]:
    """`names` started at position k: each repeat begins with a different side."""
    k %= len(names)
    return names[k:] + names[:k]


def interleave(
    results: dict[str, Any], envs: list[str], sides: dict[str, Any], order: list[str], repeats: int,
    amount: dict[str, Any], unit: str,
) -> None:
    """Run `sides[side](env, amount[env])` for every side of `order`, in a rotated order per repeat;
    fills `results` run by run, so an interrupted benchmark still reports what it measured."""
    for env in envs:
        runs: dict[str, list[Any]] = {side: [] for side in order}
        for repeat in range(repeats):
            for side in rotated(order, repeat):
                log(f"{env} repeat {repeat + 1}/{repeats}: {side}, {amount[env]} {unit}")
                try:
                    result = sides[side](env, amount[env])
                except Exception as e:  # noqa: BLE001  (a broken peer must not take the others down)
                    result = {"error": f"{type(e).__name__}: {e}"}
                log(f"  -> {json.dumps(result)}")  # the whole result: a cut-off run still leaves its data
                runs[side].append(result)
                results[env] = {"env_steps_per_s": summarize(runs, "env_steps_per_s"), "runs": runs}
