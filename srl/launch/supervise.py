"""The controller's loop, whatever the placement: reports in, failed workers restarted, stop rules.

A launcher hands over its workers as a `Workers` (local processes, Ray actors); the loop feeds
reports to the monitor (and an ensemble's adopts from its population manager to their members),
notices a worker that exited, reported an error or went silent, and restarts it in place (same role, index and shared slots; see srl.streams.incarnations) as the
`RestartPolicy` allows. A trainer (or pod) restarts from its last checkpoint. A failure past
the policy's limit ends the run with that worker's last traceback.

Several trainers of a policy (num_trainers > 1) are one torch.distributed group, which cannot take
a new member: when one fails, all of its group are killed and restarted together, in a new epoch,
and meet again as a fresh group (srl.streams.gradients) resuming from the leader's checkpoint.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any, Protocol

from srl.graph import Graph, WorkerSpec
from srl.launch.memory import MemoryWatch
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs, RunStalled, WorkerFailed
from srl.launch.reports import ReportBounds, report_check
from srl.launch.restarts import CrashLoop, RestartPolicy
from srl.storage import WriteFailed
from srl.streams.control import (
    CONTROL_OUT,
    CONTROLLER_IN,
    EPOCHS,
    Kind,
    Role,
    report_schema,
    send_command,
)
from srl.streams.incarnations import Incarnations
from srl.streams.reports import Key
from srl.streams.schema import checked
from srl.streams.transport import Receiver, Transport

POLL_S = 0.05
# Over tcp, after a restart: every EPOCHS_RESEND_S the (worker, epoch) pairs of the next
# EPOCHS_RESEND_PAIRS restarted workers, in turn, for a peer that missed a broadcast
# (srl.streams.incarnations). At most 16 * 16 bytes of pairs a second to each peer, whatever the
# run's size; a peer that missed one catches up within (restarted workers / 16) seconds.
EPOCHS_RESEND_S = 1.0
EPOCHS_RESEND_PAIRS = 16
# reports read per drain: a controller short of CPU whose workers report faster than it reads
# (4,096 workers on a loaded 2-CPU machine) read on and on in one drain, never reaching its checks;
# bounded, the loop goes round and the backlog waits in the workers' queues (srl.streams.queues)
DRAIN_LIMIT = 4096
# after exits, the time their error reports may still take to arrive: waited once for all the
# workers found ended together (a lost node's), not once each
ERROR_REPORT_WAIT_S = 0.2
# how often every worker's heartbeat is looked at (at most; a tenth of the timeout where that is
# shorter): one look costs O(N), and the loop goes round once per drain, up to a thousand times a
# second while reports stream in. Looked at each loop, 4,096 workers cost the controller more than
# the reports themselves; a silence is at worst this much later than the timeout (>= 1 s).
SILENCE_CHECK_S = 0.25


class Workers(Protocol):
    """A launcher's handle on its running workers, by name ("actor:0")."""

    def start(self, spec: WorkerSpec, graph: Graph) -> None:
        """Start (or start again) the worker of `spec`, built from `graph`."""

    def ended(self) -> dict[str, int]:
        """Every worker that has ended, with its exit code (or -signal): one look at them all
        (under Ray one wait over every worker's run, not one call each)."""

    def kill(self, name: str) -> None:
        """Force the worker dead and wait until it is (a hung one, before its restart)."""

    def running(self) -> bool:
        """Whether any worker still runs."""

    def close(self, terminate_first: bool = False) -> None:
        """End every worker left (asking politely first if `terminate_first`) and wait for it."""


def restart_graph(graph: Graph, spec: WorkerSpec, epochs: tuple[int, ...] = (), restarted_ns: int = 0) -> Graph:
    """The graph a restarted worker is built from: trainers and pods resume from a checkpoint,
    a buffer worker from its saved replay memory; over tcp it carries every worker's epoch and
    the time of the restart. A subscriber of a parameter relay goes back to it where every
    worker runs on this host (launch.launcher=local: the relay, restarted or not, is where it was,
    on the same addresses), so the service still sends one copy per host; under Ray it takes its
    parameters from the service itself: Ray may place it on another node, its relay lost with
    the old one (placement is known only once the actor runs, after its graph is sent)."""
    if epochs and graph.config.dataflow.transport == "tcp":
        graph = dataclasses.replace(graph, epochs=epochs, restarted_ns=restarted_ns)
    if spec.name in graph.param_relays and graph.config.launch.launcher != "local":
        direct = {name: relay for name, relay in graph.param_relays.items() if name != spec.name}
        graph = dataclasses.replace(graph, param_relays=direct)
    if spec.role not in (Role.TRAINER, Role.POD, Role.BUFFER):
        return graph
    # a policy's worker is built from its lane's graph: it resumes from that policy's run dir
    lanes = [dataclasses.replace(lane, graph=_resuming(lane.graph)) for lane in graph.lanes]
    return dataclasses.replace(graph, lanes=lanes)


def _resuming(graph: Graph) -> Graph:
    """A lane's graph whose workers resume from its own run dir."""
    run = graph.config.run.model_copy(update={"resume": str(graph.config.run.run_dir)})
    return dataclasses.replace(graph, config=graph.config.model_copy(update={"run": run}))


# A lock-step run cannot take a restarted worker back: the actors left running wait for the parameter
# version that follows their last segment, which a trainer restarted from an older checkpoint
# never publishes (the run would hang with every worker alive), and a restart at a moment in time
# would make the run depend on timing, which deterministic mode promises it does not.
NO_LOCK_STEP_RESTART = (
    "run.deterministic=true restarts no worker (a lock-step run cannot take one back); the run ends here. "
    "run.resume={} continues it from its last checkpoint"
)


class Supervisor:
    def __init__(
        self, graph: Graph, monitor: RunMonitor, transport: Transport, inbox: Receiver,
        workers: Workers, incarnations: Incarnations, also_rejecting: Sequence[Any] = (),
    ) -> None:  # fmt: skip
        self.graph, self.monitor, self.transport = graph, monitor, transport
        # only reports of this run's workers that hold what the monitor reads (srl.launch.reports)
        # ... and whose counts their worker can have made since the workers' launch (ReportBounds)
        bounds = ReportBounds.of_graph(graph, monitor.started_s)
        self._reports = report_check(((w.role, w.index) for w in graph.workers), bounds)
        schema = report_schema(self._reports)
        self.inbox = checked(transport, inbox, CONTROLLER_IN, schema)
        monitor.connect(transport)  # observers with streams of their own (a league's keeper)
        # other services of the controller that drop and count messages (`take_rejected`): the
        # trainers' rendezvous (srl.streams.rendezvous)
        self.also_rejecting = list(also_rejecting)
        self.workers, self.incarnations = workers, incarnations
        self.policy = RestartPolicy(graph.config.launch.max_restarts, graph.config.launch.restart_window_s)
        self._silence_check_s = min(SILENCE_CHECK_S, graph.config.launch.heartbeat_timeout_s / 10)
        self._silence_due_s = 0.0  # when every worker's heartbeat is next looked at
        self._epochs_sent_s = 0.0  # over tcp: when epochs were last broadcast (0: never, no restart yet)
        self._restarted: dict[str, None] = {}  # over tcp: every worker restarted, in order (their pairs are resent)
        self._resend_next = 0  # ... the position in it of the next pair to resend
        self.specs = {spec.name: spec for spec in graph.workers}
        # trainer -> every trainer of its torch.distributed group (num_trainers > 1), found once:
        # looked up per failure, a search of every stream cost a lost node's K workers K x N
        self._groups = {member: st.producers for st in graph.of_kind("gradients") for member in st.producers}
        self.errors: dict[str, str] = {}  # worker -> traceback of its last error report
        self.halts: dict[str, str] = {}  # worker -> why it ended the run (srl.faults.RunHalted): no restart
        self.write_fault: WriteFailed | None = None  # a worker could not write a run file: the end
        self.memory = MemoryWatch(graph.config.launch.worker_memory_limit_mib)

    def run(self, outputs: RunOutputs) -> str:
        """Until a stop rule fires (return its reason) or a failure is final (WorkerFailed)."""
        while True:
            self.transport.wait([self.inbox], POLL_S)
            self.drain()
            self._send_commands()
            self.check()
            self._rebroadcast_epochs()
            outputs.tick(self.monitor)
            pids = getattr(self.workers, "pids", None)  # local processes (not Ray's)
            if pids is not None:
                self.memory.check(pids)
            if self.memory.failed is not None:  # past worker_memory_limit_mib: no restart, the run ends
                raise WorkerFailed(*self.memory.failed)
            stop = self.monitor.stop()
            if stop is not None:
                return stop.reason

    def drain(self) -> None:
        """Feed the waiting reports (at most DRAIN_LIMIT) to the monitor; keep error reports for
        the failure's detail. The inbox passes only reports the monitor can read; the rest is
        counted with every other message this process dropped."""
        messages = self.inbox.recv_all(DRAIN_LIMIT)
        self.monitor.on_rejected(self.transport.take_rejected())
        self.monitor.on_dropped(self.transport.take_dropped())
        for service in self.also_rejecting:
            self.monitor.on_rejected(service.take_rejected())
        for message in messages:
            kind, role, index = Kind(message.header[0]), Role(message.header[1]), message.header[2]
            payload = self._reports.payload(message)  # parsed once, by the inbox's check
            if kind == Kind.ERROR:
                self.errors[f"{role.title}:{index}"] = payload.get(Key.TRACEBACK, "")
                if payload.get(Key.HALT):
                    self.halts[f"{role.title}:{index}"] = payload[Key.HALT]
                if payload.get(Key.WRITE_FAILED) and self.write_fault is None:
                    self.write_fault = WriteFailed(*payload[Key.WRITE_FAILED])
            else:
                self.monitor.on_report(role, index, payload, final=kind == Kind.FINAL)
        self._reports.forget()

    def check(self) -> None:
        """Restart every worker that ended or went silent (WorkerFailed when not allowed); a
        worker's failed write ends the run (WriteFailed): no restart writes to a full disk.
        Workers found ended together (a lost node's) are one batch: one wait for their error
        reports, one broadcast of their new epochs."""
        if self.write_fault is not None:
            raise self.write_fault
        ended = self.workers.ended()
        if ended:
            ended_s = time.monotonic()
            time.sleep(ERROR_REPORT_WAIT_S)
            self.drain()
            for name in ended:
                if name in self.halts:  # a restart would only repeat it
                    raise WorkerFailed(name, self.halts.pop(name))
            known = getattr(self.workers, "detail", lambda _: None)  # e.g. why Ray lost it
            self._failed([(name, self.errors.pop(name, "") or known(name)
                           or f"process exited unexpectedly with code {code}", ended_s)
                          for name, code in ended.items()])  # fmt: skip
        for name in getattr(self.workers, "unplaced", list)():  # Ray: waiting for resources (judged by it)
            self.monitor.on_unplaced(name)
        self._check_silence()
        self._check_stall()

    def _check_silence(self) -> None:
        """Restart the workers whose heartbeat is older than the timeout: every SILENCE_CHECK_S,
        not every loop (see there)."""
        now = time.monotonic()
        if now < self._silence_due_s:
            return
        self._silence_due_s = now + self._silence_check_s
        silent = self.monitor.silent_workers(list(self.specs))
        if silent:
            timeout = f"no heartbeat for {self.graph.config.launch.heartbeat_timeout_s} s"
            self._failed([(name, timeout, None) for name in silent])

    def _check_stall(self) -> None:
        """Lock step: every worker reports, yet nothing has moved for launch.stall_timeout_s."""
        config = self.graph.config
        limit = config.launch.stall_timeout_s
        if not config.run.deterministic or limit is None or self.monitor.still_s() < limit:
            return
        where = ", ".join(self.monitor.lock_step_positions()) or "nothing reported"
        raise RunStalled(
            f"no env step and no update for {limit:g} s (launch.stall_timeout_s) at {self.monitor.env_steps} env "
            f"steps and {self.monitor.updates} updates, every worker reporting. Last reports: {where}. In lock "
            "step each actor waits for the version after its last segment and the trainer for a segment from "
            f"each ring group: a wait nothing answers is a defect of srl. run.resume={config.run.run_dir} "
            "continues from the last checkpoint"
        )

    def _send_commands(self) -> None:
        """An ensemble's adopts, each to its member (srl.population.ensemble)."""
        for index, command in self.monitor.take_commands():
            send_command(self.transport.publisher(CONTROL_OUT), Role.POD, index, command)

    def _broadcast_epochs(self, workers: list[str]) -> None:
        """Over tcp each process keeps its own copy of the epochs: send the new epochs of
        `workers`, once (their pairs, not the whole vector: srl.streams.incarnations)."""
        if not self.transport.shares_memory and workers:
            pairs = self.incarnations.pairs(workers)
            self.transport.publisher(CONTROL_OUT).send((EPOCHS,), [pairs.tobytes()])
            self._epochs_sent_s = time.monotonic()

    def _rebroadcast_epochs(self) -> None:
        """Once a worker restarted, every EPOCHS_RESEND_S the next EPOCHS_RESEND_PAIRS of the
        restarted workers' epochs, in turn: a message on a PUB socket can be missed."""
        if not self._epochs_sent_s or time.monotonic() - self._epochs_sent_s < EPOCHS_RESEND_S:
            return
        restarted = list(self._restarted)
        start = self._resend_next % len(restarted)
        turn = (restarted + restarted)[start:start + min(EPOCHS_RESEND_PAIRS, len(restarted))]
        self._resend_next = start + len(turn)
        self._broadcast_epochs(turn)

    def _restart_group(self, name: str) -> list[str]:
        """The workers that restart with `name`: every trainer of its group, else itself."""
        return list(self._groups.get(name, (name,)))

    def _failed(self, failures: list[tuple[str, str, float | None]]) -> None:
        """Restart the workers of `failures` ((name, why, when its end was seen)) and their groups,
        all together: kill them, bump their epochs, one broadcast, start them again."""
        if self.write_fault is not None:  # its error report came while we waited for it
            raise self.write_fault
        counts = {name: self._allowed(name, detail) for name, detail, _ in failures}
        ended_s = {name: when for name, _, when in failures}
        members = list(dict.fromkeys(member for name in counts for member in self._restart_group(name)))
        for member in members:
            self.workers.kill(member)
        self.drain()
        restarted_ns = time.time_ns()  # before any peer can know of the new epoch
        for member in members:
            self.errors.pop(member, None)
            self.incarnations.bump(member)  # after the old one is dead, before the new one starts
        self._restarted.update(dict.fromkeys(members))
        self._broadcast_epochs(members)
        epochs = tuple(int(e) for e in self.incarnations.epochs)
        for member in members:
            spec = self.specs[member]
            self.workers.start(spec, restart_graph(self.graph, spec, epochs, restarted_ns))
            self.monitor.on_restart(member, ended_s.get(member))
        for name, detail, _ in failures:
            first_line = detail.strip().splitlines()[-1] if detail.strip() else "?"
            print(f"srl: restarted {name} (restart {counts[name]}, epoch {self.incarnations.of(name)}) after: "
                  f"{first_line}", file=sys.stderr)

    def _allowed(self, name: str, detail: str) -> int:
        """Its restart number, or WorkerFailed: a lock-step run, or past the restart policy."""
        if self.graph.config.run.deterministic:
            raise WorkerFailed(name, f"{detail.rstrip()}\n{NO_LOCK_STEP_RESTART.format(self.graph.config.run.run_dir)}")
        try:
            return self.policy.on_failure(name, time.monotonic())
        except CrashLoop as loop:
            if self.policy.max_restarts == 0:
                raise WorkerFailed(name, detail) from None
            raise WorkerFailed(name, f"{loop}; its last failure:\n{detail}") from None
