"""Restart policy: which failed worker may be restarted, and when a crash loop ends the run.

A kernel with no processes, shared by every launcher: the launcher reports each failure (a
worker's exit, error report or missing heartbeat) with the time; the policy allows a restart
unless the worker has already been restarted `max_restarts` times within the last
`restart_window_s` seconds, in which case the failure is final and ends the run.
"""

from __future__ import annotations

from collections import deque


class CrashLoop(Exception):
    """A worker failed once more than its restarts allow."""


class RestartPolicy:
    def __init__(self, max_restarts: int, window_s: float) -> None:
        if max_restarts < 0 or window_s <= 0:
            raise ValueError(f"need max_restarts >= 0 and window_s > 0, got {max_restarts} and {window_s}")
        self.max_restarts = max_restarts
        self.window_s = window_s
        self._recent: dict[str, deque[float]] = {}  # worker -> times of its restarts in the window
        self.total: dict[str, int] = {}  # worker -> restarts over the whole run

    def on_failure(self, worker: str, now_s: float) -> int:
        """Record a failure of `worker` at `now_s`; return its restart number (1, 2, ...), or
        raise CrashLoop if it has used up its restarts within the window."""
        recent = self._recent.setdefault(worker, deque())
        while recent and now_s - recent[0] >= self.window_s:
            recent.popleft()
        if len(recent) >= self.max_restarts:
            raise CrashLoop(self.describe(worker))
        recent.append(now_s)
        self.total[worker] = self.total.get(worker, 0) + 1
        return self.total[worker]

    def describe(self, worker: str) -> str:
        if self.max_restarts == 0:
            return "restarts are off (launch.max_restarts=0)"
        return (
            f"restarted {self.max_restarts} times within {self.window_s:g} s already "
            f"(launch.max_restarts={self.max_restarts}, launch.restart_window_s={self.window_s:g}): a crash loop"
        )
