"""Worker memory, watched by the controller: a leak gets named before the OOM killer acts.

Every CHECK_INTERVAL_S the supervisor hands over the pids of its local worker processes; a
worker whose private memory (RSS less the pages it shares: the shared-memory slots it maps, the
controller's pages it inherited by fork) grows past the limit is named in one warning line.
With `worker_memory_limit_mib` set, passing it ends the run as a failed worker does (`failed`,
raised by the supervisor as WorkerFailed: the other workers stop cleanly, the trainer saves its
checkpoint, the summary names the worker; exit code 1) rather than the kernel's OOM killer
ending some process of the machine later. Unset, the limit is half of the machine's memory and
passing it only warns.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import psutil

CHECK_INTERVAL_S = 2.0


def private_bytes(info: Any) -> int:
    """What the process holds alone: a leak grows this, a mapped shared block does not."""
    return max(info.rss - getattr(info, "shared", 0), 0)


class MemoryWatch:
    def __init__(self, limit_mib: int | None) -> None:
        self.stops = limit_mib is not None
        self.limit_bytes = limit_mib * 2**20 if limit_mib is not None else psutil.virtual_memory().total // 2
        self.setting = f"launch.worker_memory_limit_mib={limit_mib}" if self.stops else "half of the machine's memory"
        self.warned: set[str] = set()
        self.failed: tuple[str, str] | None = None  # (worker, why) past an explicit limit: the run ends
        self._last_s = 0.0

    def check(self, pids: Callable[[], dict[str, int]]) -> None:
        """Look at the memory of the workers `pids()` names (at most once per CHECK_INTERVAL_S)."""
        now = time.monotonic()
        if now - self._last_s < CHECK_INTERVAL_S:
            return
        self._last_s = now
        for name, pid in pids().items():
            try:
                info = psutil.Process(pid).memory_info()
            except psutil.Error:  # it just ended: the supervisor sees to that
                continue
            if private_bytes(info) > self.limit_bytes and name not in self.warned:
                self._over(name, pid, info)

    def _over(self, name: str, pid: int, info: Any) -> None:
        self.warned.add(name)
        what = (f"{name} (pid {pid}) has an RSS of {info.rss / 2**30:.2f} GiB, {private_bytes(info) / 2**30:.2f} "
                f"GiB of it its own, over {self.limit_bytes / 2**30:.2f} GiB ({self.setting})")
        if self.stops:
            self.failed = (name, what)
        else:
            print(f"srl: warning: {what}; a leak? set worker_memory_limit_mib to stop the run at a limit",
                  file=sys.stderr, flush=True)
