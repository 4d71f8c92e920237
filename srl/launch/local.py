"""The local launcher: one OS process per worker, supervised by the controller (this process).

Placement is all it decides. It creates the shared-memory blocks, forks the workers (torch is
already imported here, so a worker starts in milliseconds), watches reports and heartbeats,
and on any ending — target reached, Ctrl-C, a worker's crash — stops every worker, reaps it,
and unlinks every block and socket.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import shutil
import signal
import time
from typing import Any

from srl.graph import Graph
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs, WorkerFailed
from srl.launch.shell import worker_main
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, STOP, Kind, decode_report
from srl.streams.local import LocalTransport, SharedBlocks, make_ipc_dir
from srl.streams.tcp import TcpTransport

STOP_GRACE_S = 10.0
FAILURE_GRACE_S = 3.0  # a failed run may hold a hung worker: do not wait long for it
POLL_S = 0.05


class _Terminated(Exception):
    pass


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def run_local(graph: Graph, outputs: RunOutputs, monitor: RunMonitor) -> str:
    """Run until a stop rule fires; return the reason. Raises WorkerFailed on a worker error."""
    # The prefix lets a test session tell its own shared memory from other runs on the machine.
    run_id = os.environ.get("SRL_RUN_ID_PREFIX", "") + secrets.token_hex(4)
    ipc_dir = make_ipc_dir(run_id)
    wire = _tcp_wire(graph)  # None: shared memory and ipc
    blocks = SharedBlocks(run_id, graph.block_layouts() if wire is None else {})
    procs: dict[str, mp.Process] = {}
    transport = None
    previous_term = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        ctx = mp.get_context("fork")
        for spec in graph.workers:
            args = (graph, spec, run_id, ipc_dir, os.getpid(), wire)
            proc = ctx.Process(target=worker_main, args=args, daemon=True)
            proc.start()
            procs[spec.name] = proc
        transport = LocalTransport(run_id, ipc_dir) if wire is None else TcpTransport(wire)
        inbox = transport.receiver(CONTROLLER_IN)
        stopper = transport.publisher(CONTROL_OUT)
        outputs.start()
        try:
            reason = _supervise(graph, outputs, monitor, transport, inbox, procs)
        except (KeyboardInterrupt, _Terminated):
            reason = "interrupted"
        except WorkerFailed:
            # the others still stop cleanly: the trainer keeps its last checkpoint
            _stop_workers(stopper, inbox, procs, monitor, grace_s=FAILURE_GRACE_S)
            raise
        _stop_workers(stopper, inbox, procs, monitor)
        return reason
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        for proc in procs.values():  # whatever happened above, nothing outlives the run
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=5)
        if transport is not None:
            transport.close()
        blocks.unlink()
        shutil.rmtree(ipc_dir, ignore_errors=True)


def _tcp_wire(graph: Graph):
    """transport=tcp: every stream on loopback (or bind_host) ports, signed with a fresh secret."""
    if graph.config.transport != "tcp":
        return None
    import torch

    from srl.graph import make_policy
    from srl.streams.tcp_setup import make_wire

    with torch.random.fork_rng():  # the policy is built only to size the limits: leave torch's RNG as it was
        policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    return make_wire(graph, policy)


def _drain(inbox, monitor: RunMonitor) -> None:
    """Feed every waiting report to the monitor; a worker's error report raises WorkerFailed."""
    failure = None
    for message in inbox.recv_all():
        kind, role, index, payload = decode_report(message)
        if kind == Kind.ERROR:
            failure = failure or WorkerFailed(f"{role.title}:{index}", payload.get("traceback", ""))
        else:
            monitor.on_report(role, index, payload, final=kind == Kind.FINAL)
    if failure is not None:
        raise failure


def _supervise(graph, outputs, monitor, transport, inbox, procs) -> str:
    while True:
        transport.wait([inbox], POLL_S)
        _drain(inbox, monitor)
        for name, proc in procs.items():
            if proc.exitcode is not None:
                time.sleep(0.2)  # its error report may still be on the way
                _drain(inbox, monitor)
                raise WorkerFailed(name, f"process exited unexpectedly with code {proc.exitcode}")
        silent = monitor.silent_workers(list(procs))
        if silent:
            raise WorkerFailed(silent[0], f"no heartbeat for {graph.config.heartbeat_timeout_s} s")
        outputs.tick(monitor)
        reason = monitor.stop_reason()
        if reason:
            return reason


def _stop_workers(
    stopper, inbox, procs: dict[str, mp.Process], monitor: RunMonitor, grace_s: float = STOP_GRACE_S
) -> None:
    """Tell every worker to stop (again and again: a late subscriber misses one broadcast),
    collect their final reports, then force whoever is left."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        stopper.send((STOP,))
        time.sleep(POLL_S)
        try:
            _drain(inbox, monitor)
        except WorkerFailed:
            pass  # a worker failing while stopping changes nothing: it is being stopped
        if not any(p.is_alive() for p in procs.values()):
            break
    try:
        _drain(inbox, monitor)
    except WorkerFailed:
        pass
    for proc in procs.values():
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=2)
