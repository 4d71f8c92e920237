"""The local launcher: one OS process per worker, supervised by the controller (this process).

Placement is all it decides. It creates the shared-memory blocks, forks the workers (torch is
already imported here, so a worker starts in milliseconds), watches reports and heartbeats,
restarts a worker that dies (srl.launch.supervise), and on any ending — target reached, Ctrl-C,
a crash loop — stops every worker, reaps it, and unlinks every block and socket.
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import secrets
import shutil
import time
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from srl.graph import CONTROLLER, Graph, WorkerSpec, with_param_relays
from srl.graph.wiring import incarnations
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs, WorkerFailed
from srl.launch.relays import relay_groups
from srl.launch.shell import open_transport, record_opened, worker_main
from srl.launch.signals import interrupt_on_sigterm
from srl.launch.supervise import POLL_S, Supervisor
from srl.storage import WriteFailed
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, STOP
from srl.streams.gradients import TrainerGroupStore
from srl.streams.local import SharedBlocks, make_ipc_dir
from srl.streams.tcp import WILDCARDS

STOP_GRACE_S = 10.0
FAILURE_GRACE_S = 3.0  # a failed run may hold a hung worker: do not wait long for it


class LocalWorkers:
    """One forked process per worker (the `Workers` of the supervisor)."""

    def __init__(self, graph: Graph, run_id: str, ipc_dir: Path, wire: Any = None) -> None:
        self.run_id, self.ipc_dir, self.wire = run_id, ipc_dir, wire
        self.procs: dict[str, BaseProcess] = {}
        self._ctx = mp.get_context("fork")

    def start(self, spec: WorkerSpec, graph: Graph) -> None:
        args = (graph, spec, self.run_id, self.ipc_dir, os.getpid(), self.wire)
        proc = self._ctx.Process(target=worker_main, args=args, daemon=True)
        proc.start()
        self.procs[spec.name] = proc

    def ended(self) -> dict[str, int]:
        return {name: p.exitcode for name, p in self.procs.items() if p.exitcode is not None}

    def kill(self, name: str) -> None:
        proc = self.procs[name]
        if proc.is_alive():
            proc.kill()
        proc.join(timeout=5)

    def running(self) -> bool:
        return any(p.is_alive() for p in self.procs.values())

    def pids(self) -> dict[str, int]:
        """Live workers' process ids (the supervisor watches their memory)."""
        return {name: p.pid for name, p in self.procs.items() if p.is_alive() and p.pid is not None}

    def close(self, terminate_first: bool = False) -> None:
        for proc in self.procs.values():
            if proc.is_alive():
                proc.terminate() if terminate_first else proc.kill()
            proc.join(timeout=2 if terminate_first else 5)


def run_local(graph: Graph, outputs: RunOutputs, monitor: RunMonitor) -> str:
    """Run until a stop rule fires; return the reason. Raises WorkerFailed on a final worker failure.
    Every worker runs on this host: dataflow.param_relay=per_host puts one relay before all the
    subscribers (auto: none, srl.launch.relays)."""
    here = {spec.name: "localhost" for spec in graph.workers}
    relayed = with_param_relays(graph, [group for _, group in relay_groups(graph, here)])
    return run_workers(relayed, outputs, monitor, LocalWorkers)


def run_workers(
    graph: Graph, outputs: RunOutputs, monitor: RunMonitor, make_workers: Callable[..., Any]
) -> str:
    """The controller on this machine for workers placed by `make_workers(graph, run_id, ipc_dir, wire)`
    (local processes, Ray actors): shared blocks, control stream, supervision, stop, clean-up."""
    # The prefix lets a test session tell its own shared memory from other runs on the machine.
    run_id = graph.config.debug.run_id_prefix + secrets.token_hex(4)
    ipc_dir = make_ipc_dir(run_id)
    workers, transport, group_stores, blocks = None, None, {}, None
    restore_sigterm = interrupt_on_sigterm()  # SIGTERM stops the run as Ctrl-C does
    try:  # from here on the socket directory and shared blocks are removed whatever happens
        wire = _tcp_wire(graph)  # None: shared memory and ipc
        blocks = SharedBlocks(run_id, graph.block_layouts() if wire is None else {})
        workers = make_workers(graph, run_id, ipc_dir, wire)
        wire = getattr(workers, "wire", wire)  # a cluster launcher places the streams on its nodes
        graph = getattr(workers, "graph", graph)  # ... and may add parameter relays (srl.launch.relays)
        group_stores = _trainer_groups(graph, getattr(workers, "host", None))  # held until the run ends
        if group_stores:
            graph = dataclasses.replace(graph, trainer_groups={k: s.address for k, s in group_stores.items()})
        for spec in graph.workers:
            workers.start(spec, graph)
        transport = open_transport(graph, run_id, ipc_dir, wire)
        inbox = transport.receiver(CONTROLLER_IN)
        stopper = transport.publisher(CONTROL_OUT)
        supervisor = Supervisor(graph, monitor, transport, inbox, workers, incarnations(graph, transport),
                                also_rejecting=list(group_stores.values()))  # fmt: skip
        outputs.start()
        try:
            reason = supervisor.run(outputs)
        except KeyboardInterrupt:
            reason = "interrupted"
        except (WorkerFailed, WriteFailed):
            # the others still stop cleanly: the trainer keeps its last checkpoint
            _stop_workers(stopper, supervisor, workers, grace_s=FAILURE_GRACE_S)
            raise
        _stop_workers(stopper, supervisor, workers)
        if supervisor.write_fault is not None:  # a final checkpoint (say) found the disk full
            raise supervisor.write_fault
        return reason
    finally:
        restore_sigterm()
        if workers is not None:
            workers.close()  # whatever happened above, nothing outlives the run
        if transport is not None:
            record_opened(graph, CONTROLLER, transport.opened | {(name, "bind") for name in group_stores})
            transport.close()
        for store in group_stores.values():
            store.close()
        if blocks is not None:
            blocks.unlink()
        shutil.rmtree(ipc_dir, ignore_errors=True)


def _trainer_groups(graph: Graph, host: str | None) -> dict[str, TrainerGroupStore]:
    """For each gradients stream (a policy's num_trainers > 1), by its name: the store where its
    trainers form their group."""
    return {st.name: _trainer_group(graph, host, len(st.producers)) for st in graph.of_kind("gradients")}


def _trainer_group(graph: Graph, host: str | None, world_size: int) -> TrainerGroupStore:
    """A store served from here on a port the OS picks, listening on `host` (this machine's IP for
    a cluster) or else on the run's bind_host (loopback by default; trainers reach a wildcard at
    loopback). Tests replace it to replay requests at the store before workers start."""
    bind_host = host or graph.config.dataflow.bind_host
    reach = host or ("127.0.0.1" if bind_host in WILDCARDS else bind_host)
    return TrainerGroupStore(reach, world_size, bind_host=bind_host)


def _tcp_wire(graph: Graph):
    """dataflow.transport=tcp: every stream on loopback (or bind_host) ports, signed with a fresh secret."""
    if graph.config.dataflow.transport != "tcp":
        return None
    from srl.streams.tcp_setup import make_wire

    return make_wire(graph)


def _stop_workers(stopper, supervisor: Supervisor, workers: Any, grace_s: float = STOP_GRACE_S) -> None:
    """Tell every worker to stop (again and again: a late subscriber misses one broadcast),
    collect their final reports, then force whoever is left. Failures now change nothing."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        stopper.send((STOP,))
        time.sleep(POLL_S)
        supervisor.drain()
        if not workers.running():
            break
    supervisor.drain()
    workers.close(terminate_first=True)
