"""A worker kind of your own: a kernel class with the streams it takes and gives, registered by
name (`register_worker`) and placed by the config's `extra_workers` like the built-in workers;
docs/custom.md, "A worker of your own". Inputs: "samples" (srl.streams.samples.SampleTap: copies
of the segments the trainers take) or another placed kind's output; outputs: raw senders.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from srl.monitor.timing import TimeBreakdown
from srl.streams.transport import Receiver, Sender


class Worker:
    """Polled in its own process (or in turn, launcher=inline) until the run stops; `report()`
    goes to the controller as every worker's does, and its heartbeat with it."""

    def __init__(self, inputs: dict[str, Any], outputs: dict[str, Sender], run_dir: Path, index: int) -> None:
        self.inputs, self.outputs = inputs, outputs
        self.run_dir, self.index = run_dir, index  # index: among the placed workers of this kind

    @property
    def receivers(self) -> list[Receiver]:
        """What its process waits on while `poll` finds nothing."""
        return [r for i in self.inputs.values() for r in getattr(i, "receivers", [i])]

    def start(self) -> None:
        pass

    def poll(self) -> bool:
        """Do some work; False when there was none (the process then waits on `receivers`)."""
        raise NotImplementedError

    def report(self) -> dict[str, Any]:
        return {}

    def finish(self) -> dict[str, Any]:
        """The last report, after the last poll (srl.workers.kernel.Kernel)."""
        return self.report()

    @functools.cached_property
    def clock(self) -> TimeBreakdown:
        """Where its time goes (srl.monitor.timing): the loop labels waiting and other; label your
        own work with `clock.switch`. Made on first use: a subclass need not call this __init__."""
        return TimeBreakdown()

    def close(self) -> None:
        pass
