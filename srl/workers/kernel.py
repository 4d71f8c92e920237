"""The worker-kernel contract: what every launcher calls on a worker, and nothing else.

    kernel = make_kernel(graph, spec, transport)  # srl.graph.build: wired to its streams
    kernel.start()                                # once, before the first poll
    until the controller says stop:
        if not kernel.poll():                     # False: nothing to do now
            transport.wait(kernel.receivers, ...) # sleep until one of them has a message
        every REPORT_INTERVAL_S: send kernel.report()  # counts since the last report
    send kernel.finish()                          # the last report (a trainer checkpoints first)
    kernel.close()                                # always, after an error too

srl.launch.shell runs this loop in a worker process, srl.launch.inline runs every kernel's in
turn in one. A kernel holds no config: its builder passes what it needs.

`clock` is the kernel's own TimeBreakdown: a kernel labels its work with it (env steps,
inference, training) and the loop charges the rest to waiting and other; a kernel that labels
nothing still has one, for the loop's labels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from srl.monitor.timing import TimeBreakdown
from srl.streams.transport import Receiver


@runtime_checkable
class Kernel(Protocol):
    clock: TimeBreakdown

    @property
    def receivers(self) -> list[Receiver]:
        """What the kernel waits on when `poll` found nothing to do (empty: it only computes)."""
        ...

    def start(self) -> None:
        """Once, before the first `poll`: reset envs, send first requests, resume from a checkpoint."""
        ...

    def poll(self) -> bool:
        """Do what is ready without blocking; True if there was anything."""
        ...

    def report(self) -> Mapping[str, Any]:
        """Counts since the last report (the controller sums them): reading resets them. A
        kernel's returns its role's report type (srl.streams.reports: ActorReport, ...)."""
        ...

    def finish(self) -> Mapping[str, Any]:
        """The last report, after the last poll: a kernel that keeps state saves it first."""
        ...

    def close(self) -> None:
        """Release envs, sockets and files; called after an error too, so it must not raise on
        a kernel that never started."""
        ...


class KernelDefaults:
    """The contract's parts for a kernel with nothing to set up, keep past the run or release."""

    def start(self) -> None:
        pass

    def report(self) -> Mapping[str, Any]:
        raise NotImplementedError

    def finish(self) -> Mapping[str, Any]:
        return self.report()  # nothing kept past the run: the last report is a report

    def close(self) -> None:
        pass
