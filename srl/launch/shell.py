"""The worker shell: the loop, transport, reports and stop around any kernel, in its own process.

The kernel is any srl.workers.kernel.Kernel. The shell never spins: with nothing to do it blocks
on the kernel's receivers and the stop signal. `serve` is a worker's whole life in its process,
whichever launcher placed it: forked by the local launcher (`worker_main`), or in a Ray actor
(srl.launch.ray_launcher).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
import traceback
from pathlib import Path
from typing import Any

from srl.faults import RunHalted
from srl.monitor.timing import OTHER, WAITING
from srl.storage import WriteFailed
from srl.streams.control import Kind
from srl.streams.reports import Key
from srl.workers.kernel import Kernel

REPORT_INTERVAL_S = 0.5
IDLE_WAIT_S = 0.1
# A busy kernel looks for the stop (and epochs) once a millisecond, not on every poll: an actor
# polls thousands of times a second, and each look asks the socket (~1 us). An idle one looks
# each time it wakes.
STOP_CHECK_S = 0.001


def run_kernel_loop(kernel: Kernel, link: Any, transport: Any, parent_pid: int | None = None,
                    jitter_max_s: float = 0.0) -> None:
    """Poll until the controller says stop (or the parent vanished); report periodically.
    `jitter_max_s` (debug.jitter_max_s): a random pause of up to that before every poll."""
    receivers = kernel.receivers + link.receivers
    clock = kernel.clock
    obey = getattr(kernel, "command", None)  # a kernel that takes the controller's commands (ensemble members)
    kernel.start()
    last_report = next_stop_check = time.monotonic()
    jitter = random.Random() if jitter_max_s > 0 else None  # unseeded on purpose
    while True:
        now = time.monotonic()
        if now >= next_stop_check:
            if link.poll_stop():
                break
            for command in link.take_commands():
                if obey is not None:
                    obey(command)
            next_stop_check = now + STOP_CHECK_S
        if jitter is not None:
            time.sleep(jitter.uniform(0, jitter_max_s))
        if not kernel.poll():
            clock.switch(WAITING)
            transport.wait(receivers, IDLE_WAIT_S)
            clock.switch(OTHER)
            next_stop_check = now  # woken: perhaps by the stop
        if now - last_report >= REPORT_INTERVAL_S:
            link.send(Kind.REPORT, report_of(kernel, transport))
            last_report = now
            if parent_pid is not None and os.getppid() != parent_pid:
                raise RuntimeError("the controller process is gone")
    link.send(Kind.FINAL, {**kernel.finish(), Key.TIME_BREAKDOWN: clock.take(), **_rejected(transport)})


def report_of(kernel: Kernel, transport: Any) -> dict[str, Any]:
    """A report: the kernel's counts since the last one, its time breakdown, the messages dropped."""
    return {**kernel.report(), Key.TIME_BREAKDOWN: kernel.clock.take(), **_rejected(transport)}


def _rejected(transport: Any) -> dict[str, Any]:
    """The messages this worker's receivers refused, and those it dropped at a queue's bound, since
    its last report, for the run's counts."""
    counts = {Key.REJECTED: transport.take_rejected(), Key.DROPPED: transport.take_dropped()}
    return {key: value for key, value in counts.items() if value}


def error_report(error: BaseException) -> dict[str, Any]:
    """A worker's error report: its traceback, and for a fault that a restart would only repeat
    the fault itself, with which the controller ends the run instead of restarting the worker: a
    RunHalted's one-line message (srl.faults), a failed write of a run file (a checkpoint on a full
    disk: srl.storage.WriteFailed)."""
    report: dict[str, Any] = {Key.TRACEBACK: traceback.format_exc()}
    if isinstance(error, RunHalted):
        report[Key.HALT] = str(error)
    if isinstance(error, WriteFailed):
        report[Key.WRITE_FAILED] = [error.errno, error.strerror, error.filename]
    return report


def _last_counts(kernel: Kernel, link: Any, transport: Any) -> None:
    """A halted kernel's counts up to the halt, before its error report: the episodes an actor
    skipped until its env's skips ended the run are in summary.json. A kernel that cannot say
    them (it halted while starting) sends none: the halt's own message goes next all the same."""
    try:
        payload = report_of(kernel, transport)
    except Exception:  # noqa: BLE001  (the halt is what must reach the controller)
        return
    link.send(Kind.REPORT, payload)


def make_link(graph: Any, spec: Any, transport: Any) -> Any:
    """The worker's control link; over tcp it also keeps this process's copy of the epochs."""
    from srl.graph.wiring import incarnations
    from srl.streams.control import WorkerLink

    epochs = None if transport.shares_memory else incarnations(graph, transport).epochs
    return WorkerLink(transport, spec.role, spec.index, epochs)


def open_transport(graph: Any, run_id: str, ipc_dir: Path, wire: Any = None) -> Any:
    """This process's transport: shared memory and ipc, or tcp where the launcher made a `wire`
    (ports and secret, srl.streams.tcp.Wire); each stream's queue sized by the graph's messages."""
    from srl.streams.local import LocalTransport
    from srl.streams.tcp import TcpTransport

    sockets = graph.sockets_per_process()  # past ZeroMQ's default where a worker serves 1,000+ actors
    if wire is not None:
        return TcpTransport(wire, graph.restarted_ns, sockets)
    budget = graph.config.dataflow.max_queued_bytes_per_peer  # bytes queued per peer (srl.streams.queues)
    return LocalTransport(run_id, ipc_dir, budget, graph.message_bytes(shares_memory=True), sockets)


def record_opened(graph: Any, who: str, opened: set[tuple[str, str]]) -> None:
    """With debug.record_streams (tests/test_declared_streams.py), the streams a process opened go
    to streams/<who>.json in the run directory, to be compared with what the graph declares."""
    if not graph.config.debug.record_streams:
        return
    folder = Path(str(graph.config.run.run_dir)) / "streams"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{who}.json").write_text(json.dumps(sorted(opened)))


def lower_priority(graph: Any, spec: Any) -> None:
    """An actor yields the CPU to the policy worker and trainer it waits on (launch.actor_niceness,
    added to this process's niceness as Sample Factory does with its rollout workers)."""
    from srl.streams.control import Role

    niceness = graph.config.launch.actor_niceness
    if spec.role == Role.ACTOR and niceness > 0:
        os.nice(niceness)


def serve(graph: Any, spec: Any, transport: Any, parent_pid: int | None = None) -> None:
    """A worker's life on its open transport: build its kernel, run the loop until stopped; an
    error is reported to the controller, then raised. The transport is closed at the end."""
    from srl.graph.build import make_kernel

    lower_priority(graph, spec)
    link = make_link(graph, spec, transport)
    kernel: Kernel | None = None
    try:
        kernel = make_kernel(graph, spec, transport)
        run_kernel_loop(kernel, link, transport, parent_pid, graph.config.debug.jitter_max_s)
    except BaseException as e:
        if isinstance(e, RunHalted) and kernel is not None:
            _last_counts(kernel, link, transport)
        link.send(Kind.ERROR, error_report(e))
        raise
    finally:
        try:
            if kernel is not None:
                kernel.close()
        finally:
            record_opened(graph, spec.name, transport.opened)
            transport.close()


def worker_main(graph: Any, spec: Any, run_id: str, ipc_dir: Path, parent_pid: int, wire: Any = None) -> None:
    """Entry point of a worker process forked by the local launcher; `wire` (tcp ports and
    secret, srl.streams.tcp.Wire) selects the tcp backend."""
    import setproctitle
    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the controller's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    setproctitle.setproctitle(f"srl:{graph.config.experiment}:{spec.role.title}:{spec.index}")
    torch.set_num_threads(graph.config.threads_for(trains=spec.role.trains))
    transport = open_transport(graph, run_id, ipc_dir, wire)
    code = 0
    try:
        serve(graph, spec, transport, parent_pid)
    except BaseException:  # noqa: BLE001  (reported to the controller already)
        code = 1
    finally:
        if os.getppid() != parent_pid:  # the controller was killed: no one else will remove its
            shutil.rmtree(ipc_dir, ignore_errors=True)  # sockets' directory (made on tcp too: srl.streams.local)
        os._exit(code)  # skip atexit handlers inherited from the controller through fork
