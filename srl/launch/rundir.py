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
  load only their own run's (srl.checkpoint.load_latest);
* a launch that does not start (a full disk, a refused resume) leaves the directory as it found
  it: the previous holder's record, or no run.lock (and no directory) where there was none. A
  write that fails here is srl.storage's WriteFailed (one line naming the file and the errno):
  on a disk full at start, os.open made run.lock and the write of its record raised, which left an
  empty run.lock and a traceback.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

from srl.config import ConfigError, ExperimentConfig
from srl.storage import failing_as

LOCK_FILE = "run.lock"
RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.json", "checkpoints")


class RunDirClaim:
    """The held lock of a run directory, and this launch's number in it."""

    def __init__(self, fd: int, launch: int, previous: dict[str, Any], run_dir: Path, made_dir: bool) -> None:
        self.launch = launch
        self._fd: int | None = fd
        self._previous = previous  # the holder before this launch
        self._run_dir, self._made_dir = run_dir, made_dir

    def release(self, launched: bool = True) -> None:
        """Unlock (for forked workers still holding the file too) and close; idempotent. A launch
        refused before it started (`launched=False`) leaves the previous holder's record, or none."""
        if self._fd is not None:
            if not launched:
                _leave_as_found(self._fd, self._previous, self._run_dir, self._made_dir)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holds_run(run_dir: Path) -> list[str]:
    """The files that show `run_dir` holds a run (none: it may take a new one)."""
    return [name for name in RUN_FILES if (run_dir / name).exists()]


def claim_run_dir(config: ExperimentConfig) -> RunDirClaim:
    """Lock `config.run.run_dir` for this launch, refusing one in use or one that holds another run;
    sets `config.run.run_id`. ConfigError (one line, naming the directory) when refused; WriteFailed
    (one line, naming the file and the errno) when the directory or run.lock cannot be written."""
    run_dir = Path(str(config.run.run_dir))
    resuming = config.run.resume is not None
    # elsewhere its trainer would find no checkpoint
    if resuming and Path(str(config.run.resume)).resolve() != run_dir.resolve():
        raise ConfigError(f"field 'run.run_dir': run.resume={config.run.resume} continues that run in its own directory, "
                          f"not in {str(run_dir)!r}; leave run_dir out (copy the directory to branch off a run)")
    made_dir = not run_dir.is_dir()
    with failing_as(run_dir):
        run_dir.mkdir(parents=True, exist_ok=True)
    fd = _locked(run_dir)
    previous = _read(fd)
    try:
        found = holds_run(run_dir)
        if found and not resuming:
            raise ConfigError(
                f"field 'run.run_dir': {str(run_dir)!r} already holds a run ({', '.join(found)}); continue it with "
                f"run.resume={run_dir} or choose another run_dir"
            )
        run_id = config.run.run_id or (previous.get("run_id") if resuming else None) or secrets.token_hex(8)
        launch = int(previous.get("launch", 1 if found else 0)) + 1 if resuming else 1
        with failing_as(run_dir / LOCK_FILE):
            _write(fd, {"run_id": run_id, "launch": launch, "pid": os.getpid(), "host": socket.gethostname(),
                        "started_unix_s": round(time.time(), 3)})
    except BaseException:
        _leave_as_found(fd, previous, run_dir, made_dir)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise
    config.run.run_id = run_id
    return RunDirClaim(fd, launch, previous, run_dir, made_dir)


def _locked(run_dir: Path) -> int:
    """run.lock opened and locked. A launch that gives up removes a run.lock it made while it holds
    the lock: one who opened that file in the meantime then locks a name gone from the directory,
    and must open the new one (else two launches would each hold a lock of the directory)."""
    path = run_dir / LOCK_FILE
    while True:
        with failing_as(path):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read(fd))
            os.close(fd)
            raise ConfigError(f"field 'run.run_dir': {str(run_dir)!r} is in use by another run{holder}; "
                              "wait for it to end or choose another run_dir") from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # closing releases the lock of the removed file


def _leave_as_found(fd: int, previous: dict[str, Any], run_dir: Path, made_dir: bool) -> None:
    """A launch that did not start: the previous holder's record back, or no run.lock (and no
    directory, if this launch made it and it is empty) where there was none. Best effort: the
    record is only informative, and the disk may be the reason the launch did not start."""
    try:
        if previous:
            _write(fd, previous)
            return
        (run_dir / LOCK_FILE).unlink(missing_ok=True)
        if made_dir:
            run_dir.rmdir()
    except OSError:
        pass


def _read(fd: int) -> dict[str, Any]:
    """The lock file's JSON (an empty or unreadable one is no holder: it is only informative)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 65536) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(fd: int, holder: dict[str, Any]) -> None:
    """The record over the old one, then cut to its length: a write that fails (ENOSPC) leaves the
    old record, where truncating first left an empty file."""
    data = (json.dumps(holder) + "\n").encode()
    if os.pwrite(fd, data, 0) != len(data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a short write: the rest did not fit
    os.ftruncate(fd, len(data))


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return ""
    return f" (pid {holder.get('pid')} on {holder.get('host')}, launch {holder.get('launch')} of run {holder.get('run_id')})"
