"""The inline launcher: every worker's kernel in this one process, polled in turn.

The same kernels and stream code as the local launcher, over in-process queues and memory:
for debugging (one stack, breakpoints work), for tests, and for runs whose every step needs all
of a small machine's cores in turn (a CNN update on 2 cores: docs/tuning.md).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from srl.faults import RunHalted
from srl.graph import Graph, WorkerSpec
from srl.graph.build import make_kernel
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs
from srl.launch.shell import REPORT_INTERVAL_S
from srl.launch.signals import interrupt_on_sigterm
from srl.monitor.timing import OTHER, WAITING
from srl.streams.control import Role
from srl.streams.inline import InlineTransport
from srl.streams.reports import Key
from srl.workers.kernel import Kernel


def run_inline(graph: Graph, outputs: RunOutputs, monitor: RunMonitor) -> str:
    torch.set_num_threads(graph.config.threads_for(trains=True))
    transport = InlineTransport()
    monitor.connect(transport)  # observers with streams of their own (a league's keeper)
    kernels = [(spec, make_kernel(graph, spec, transport)) for spec in graph.workers]
    for _, kernel in kernels:  # a kernel waits while the others take their turns
        kernel.clock.switch(WAITING)
    outputs.start()
    # SIGTERM stops the run as Ctrl-C does: the kernels still finish, so the trainer saves its
    # last checkpoint
    restore_sigterm = interrupt_on_sigterm()
    try:
        for _, kernel in kernels:
            kernel.start()
        try:
            reason = _take_turns(kernels, monitor, outputs)
        except KeyboardInterrupt:
            reason = "interrupted"
        for spec, kernel in kernels:
            monitor.on_report(spec.role, spec.index, {**kernel.finish(), Key.TIME_BREAKDOWN: kernel.clock.take()}, final=True)
        return reason
    finally:
        restore_sigterm()
        for _, kernel in kernels:
            kernel.close()


def _take_turns(kernels: list[tuple[WorkerSpec, Kernel]], monitor: RunMonitor, outputs: RunOutputs) -> str:
    """Polls every kernel in turn, reporting every REPORT_INTERVAL_S, until the monitor says stop."""
    last_report = time.monotonic()
    reason = None
    while reason is None:
        for spec, kernel in kernels:
            kernel.clock.switch(OTHER)
            try:
                kernel.poll()
            except RunHalted:  # its counts up to the halt still count (as srl.launch.shell sends them)
                monitor.on_report(spec.role, spec.index, {**kernel.report(), Key.TIME_BREAKDOWN: kernel.clock.take()})
                raise
            kernel.clock.switch(WAITING)
        if time.monotonic() - last_report >= REPORT_INTERVAL_S:
            for spec, kernel in kernels:
                monitor.on_report(spec.role, spec.index, {**kernel.report(), Key.TIME_BREAKDOWN: kernel.clock.take()})
            _obey(kernels, monitor)
            last_report = time.monotonic()
            outputs.tick(monitor)
            stop = monitor.stop()
            reason = None if stop is None else stop.reason
    return reason


def _obey(kernels: list[tuple[WorkerSpec, Kernel]], monitor: RunMonitor) -> None:
    """An ensemble's adopts go straight to their members' kernels (other launchers send them on
    control.out: srl.launch.supervise)."""
    pods: dict[int, Any] = {spec.index: kernel for spec, kernel in kernels if spec.role == Role.POD}
    for index, command in monitor.take_commands():
        pods[index].command(command)  # a member kernel (srl.workers.member)
