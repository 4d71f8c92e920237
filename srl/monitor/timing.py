"""Where a worker's wall time goes: a stopwatch that is always running in one category.

A worker's clock is in exactly one category at any moment; `switch` closes the current
interval and opens the next, so the categories always add up to the wall time and one switch
costs one `perf_counter` call. Work that nobody labelled lands in "other". Nesting is by hand:

    previous = clock.switch(INFERENCE)
    ...forward pass...
    clock.switch(previous)

The worker shell switches to WAITING around its idle wait and attaches `take()` to every
report (srl.streams.reports.Key.TIME_BREAKDOWN); the controller sums them per worker
(`BreakdownTable`) and prints and saves the table.
"""

from __future__ import annotations

import time
from typing import Any

ENV_STEP = "env_step"  # stepping environments
INFERENCE = "inference"  # policy forward passes (and action sampling)
TRAINING = "training"  # the algorithm's update
REPLAY = "replay"  # the buffer's replay memory: storing transitions, sampling batches, priorities
SEND_RECV = "send_recv"  # streams: requests, replies, segments, parameters, batch copies
WAITING = "waiting"  # idle: blocked on sockets with nothing to do (inline launcher: other kernels' turns)
OTHER = "other"  # everything else: recording rows, episode bookkeeping, reports, checkpoints
CATEGORIES = (ENV_STEP, INFERENCE, TRAINING, REPLAY, SEND_RECV, WAITING, OTHER)
FILE_NAME = "time_breakdown.json"


class TimeBreakdown:
    """Accumulated seconds per category since the last `take()`."""

    __slots__ = ("spent", "current", "_since")

    def __init__(self) -> None:
        self.spent = dict.fromkeys(CATEGORIES, 0.0)
        self.current = OTHER
        self._since = time.perf_counter()

    def switch(self, category: str) -> str:
        """Charge the time since the last switch to the current category, then enter `category`;
        returns the category left (to switch back to)."""
        now = time.perf_counter()
        previous = self.current
        self.spent[previous] += now - self._since
        self._since, self.current = now, category
        return previous

    def take(self) -> dict[str, float]:
        """Seconds per category since the last take (the current interval included); resets."""
        self.switch(self.current)
        out = {k: round(v, 6) for k, v in self.spent.items()}
        self.spent = dict.fromkeys(CATEGORIES, 0.0)
        return out


class BreakdownTable:
    """The controller's sum of every worker's reported breakdowns."""

    def __init__(self) -> None:
        self.workers: dict[str, dict[str, float]] = {}

    def add(self, worker: str, seconds: dict[str, Any]) -> None:
        total = self.workers.setdefault(worker, dict.fromkeys(CATEGORIES, 0.0))
        for category in CATEGORIES:
            total[category] += float(seconds.get(category, 0.0))

    def as_dict(self) -> dict[str, dict[str, float]]:
        """worker -> {category: seconds, ..., "wall": seconds}, workers sorted by name."""
        return {worker: {**{k: round(v, 3) for k, v in seconds.items()}, "wall": round(sum(seconds.values()), 3)}
                for worker, seconds in sorted(self.workers.items())}

    def format(self) -> str:
        """A text table: one row per worker, each category as a percentage of its wall time."""
        head = f"{'worker':<12}{'wall s':>8}" + "".join(f"{c:>11}" for c in CATEGORIES)
        lines = ["time breakdown (% of each worker's wall time)", head]
        for worker, seconds in self.as_dict().items():
            wall = seconds["wall"] or 1e-9
            cells = "".join(f"{100 * seconds[c] / wall:>10.1f}%" for c in CATEGORIES)
            lines.append(f"{worker:<12}{seconds['wall']:>8.1f}{cells}")
        return "\n".join(lines)
