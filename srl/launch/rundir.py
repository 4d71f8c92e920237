"""A run directory belongs to one run: claimed at launch, locked while it runs.

    claim = claim_run_dir(config)   # before anything is written there; sets config.run.run_id
    ...                             # the run
    claim.release()                 # at any end (the OS releases it too if the process dies)

Without this, a new run in a used directory appended to the old metrics, and its restarted trainer
resumed from the old run's checkpoint; two runs in one directory interleaved. So:

* a directory that holds a run (config.yaml, metrics.jsonl, summary.json or checkpoints/) is
  refused, unless `run.resume=` names it: then this launch continues that run, with its run id;
* `run.lock` in the directory is locked (fcntl.flock) by the controller while the run lasts; a
  second launch on it is refused, naming the holder. Forked workers share the lock (it is theirs
  too), so it stays held until the last of them is gone. The file keeps the holder's JSON:
  run id, launch number (1, 2, ... for each resume), pid, host, start time;
* `run_id` (a new random one, or the resumed run's) is stamped on every checkpoint; trainers
  load only their own run's (srl.checkpoint.load_latest).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

from srl.config import ConfigError, ExperimentConfig

LOCK_FILE = "run.lock"
RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.json", "checkpoints")


class RunDirClaim:
    """The held lock of a run directory, and this launch's number in it."""

    def __init__(self, fd: int, launch: int, previous: dict[str, Any]) -> None:
        self.launch = launch
        self._fd: int | None = fd
        self._previous = previous  # the holder before this launch

    def release(self, launched: bool = True) -> None:
        """Unlock (for forked workers still holding the file too) and close; idempotent. A launch
        refused before it started (`launched=False`) leaves the previous holder's record."""
        if self._fd is not None:
            if not launched:
                _write(self._fd, self._previous)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holds_run(run_dir: Path) -> list[str]:
    """The files that show `run_dir` holds a run (none: it may take a new one)."""
    return [name for name in RUN_FILES if (run_dir / name).exists()]


def claim_run_dir(config: ExperimentConfig) -> RunDirClaim:
    """Lock `config.run.run_dir` for this launch, refusing one in use or one that holds another run;
    sets `config.run.run_id`. ConfigError (one line, naming the directory) when refused."""
    run_dir = Path(str(config.run.run_dir))
    resuming = config.run.resume is not None
    # elsewhere its trainer would find no checkpoint
    if resuming and Path(str(config.run.resume)).resolve() != run_dir.resolve():
        raise ConfigError(f"field 'run.run_dir': run.resume={config.run.resume} continues that run in its own directory, "
                          f"not in {str(run_dir)!r}; leave run_dir out (copy the directory to branch off a run)")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise ConfigError(f"field 'run.run_dir': cannot use {str(run_dir)!r}: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _describe(_read(fd))
        os.close(fd)
        raise ConfigError(f"field 'run.run_dir': {str(run_dir)!r} is in use by another run{holder}; "
                          "wait for it to end or choose another run_dir") from None
    try:
        previous = _read(fd)
        found = holds_run(run_dir)
        if found and not resuming:
            raise ConfigError(
                f"field 'run.run_dir': {str(run_dir)!r} already holds a run ({', '.join(found)}); continue it with "
                f"run.resume={run_dir} or choose another run_dir"
            )
        run_id = config.run.run_id or (previous.get("run_id") if resuming else None) or secrets.token_hex(8)
        launch = int(previous.get("launch", 1 if found else 0)) + 1 if resuming else 1
        _write(fd, {"run_id": run_id, "launch": launch, "pid": os.getpid(), "host": socket.gethostname(),
                    "started_unix_s": round(time.time(), 3)})
    except BaseException:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise
    config.run.run_id = run_id
    return RunDirClaim(fd, launch, previous)


def _read(fd: int) -> dict[str, Any]:
    """The lock file's JSON (an empty or unreadable one is no holder: it is only informative)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(fd: int, holder: dict[str, Any]) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    if holder:
        os.write(fd, (json.dumps(holder) + "\n").encode())


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return ""
    return f" (pid {holder.get('pid')} on {holder.get('host')}, launch {holder.get('launch')} of run {holder.get('run_id')})"
