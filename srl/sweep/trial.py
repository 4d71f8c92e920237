"""One trial: an ordinary `srl run` in its own run directory and process group.

Its own process (`python -m srl.cli run ...`) keeps trials apart: a crash, a leak or a stuck
worker ends with its trial. Its own process group lets the sweep stop it as Ctrl-C would (SIGINT
to the group: the controller tells its workers to finish and writes summary.json), and kill
every process of it if that does not end it in time, so nothing outlives the sweep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

LOG_FILE = "trial.log"


def _child_setup() -> None:
    """In the trial's process, before exec: Ctrl-C handled even if the sweep runs in the background
    (a shell's background job starts with SIGINT ignored, and Python keeps it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class TrialProcess:
    def __init__(self, run_dir: Path, experiment: str, overrides: list[str]) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.command = [sys.executable, "-m", "srl.cli", "run", experiment, *overrides, f"run.run_dir={run_dir}"]
        (run_dir / "command.txt").write_text(" ".join(self.command) + "\n")
        self._log = open(run_dir / LOG_FILE, "ab")  # noqa: SIM115  (closed in wait)
        self.proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, preexec_fn=_child_setup)
        self._offset = 0
        self._partial = b""
        self.stopping_since: float | None = None  # monotonic time of the Ctrl-C sent to it

    def new_metrics(self) -> list[dict[str, Any]]:
        """Rows of metrics.jsonl written since the last call (complete lines only)."""
        path = self.run_dir / "metrics.jsonl"
        try:
            with open(path, "rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        *lines, self._partial = (self._partial + chunk).split(b"\n")
        rows = []
        for line in lines:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a torn line of a killed run: the next rows still count
        return rows

    def stop(self) -> None:
        """Ctrl-C the trial (its summary is written); `kill_if_stuck` ends it if that takes too long."""
        if self.stopping_since is None and self.proc.poll() is None:
            self.stopping_since = time.monotonic()
            self._signal(signal.SIGINT)

    def kill_if_stuck(self, grace_s: float) -> None:
        if self.stopping_since is not None and time.monotonic() - self.stopping_since > grace_s:
            self._signal(signal.SIGKILL)

    def kill(self) -> None:
        """Every process of the trial, now (the sweep itself is failing)."""
        self._signal(signal.SIGKILL)
        self.proc.wait()
        self._log.close()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def finish(self, grace_s: float) -> int:
        """Wait for the trial's end (killed `grace_s` after a stop), then kill what is left of its
        group: workers that outlive their controller are not left behind."""
        while self.proc.poll() is None:
            self.kill_if_stuck(grace_s)
            time.sleep(0.05)
        self._signal(signal.SIGKILL)  # the group's leftovers, if any (none after a clean end)
        self._log.close()
        return self.proc.returncode

    def summary(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.run_dir / "summary.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
