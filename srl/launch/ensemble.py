"""The population manager: K pods at once, a leaderboard, lagging members replaced one at a time.

    members (handles: srl.launch.members) --report--> RunMonitor (metrics, stop rules)
                                          --eval----> Tournament.on_eval (srl.workers.tournament)
                                                        leaderboard: keep or delete the checkpoint
                                                        lagging? -> adopt(leader's copy, perturbed hparams)

Runs in the controller process, as the local launcher's supervisor does. `launch.launcher=local` forks
one process per member; `launch.launcher=inline` polls every member here in turn; `launch.launcher=ray` runs
each member in a Ray actor holding `ray_resources.pod` (srl.launch.ray_members), on a local Ray
instance started for the run unless `ray_address` names a cluster. The run stops when a
member's mean return over its last 100 training episodes reaches `target_return` (the same rule
as a single pod's), or on the monitor's other rules (env steps of all members, time, updates).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from srl import leaderboard
from srl.graph import Graph
from srl.launch.members import InlineMember, ProcessMember
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs, WorkerFailed
from srl.launch.signals import interrupt_on_sigterm
from srl.monitor.episodes import WINDOW, ReturnWindow
from srl.streams.control import Role
from srl.workers.tournament import Entry, Tournament

POLL_S = 0.05


def make_tournament(graph: Graph) -> Tournament:
    e = graph.config.pod.ensemble
    return Tournament(
        e.population, size=e.leaderboard_size, ready_evals=e.ready_evals, lag_fraction=e.lag_fraction,
        margin=e.margin, exploit_top=e.exploit_top, perturb=tuple(e.perturb),
        factors=tuple(e.perturb_factors), seed=graph.config.run.seed,
    )


class PopulationManager:
    """Routes members' messages: reports to the monitor, evaluations to the tournament."""

    def __init__(self, graph: Graph, monitor: RunMonitor, handles: list[Any], started_s: float) -> None:
        self.config, self.monitor, self.handles = graph.config, monitor, handles
        self.run_dir = Path(str(graph.config.run.run_dir))
        (self.run_dir / leaderboard.FOLDER).mkdir(parents=True, exist_ok=True)
        self.tournament = make_tournament(graph)
        self.started_s = started_s
        self.windows = [ReturnWindow(WINDOW) for _ in handles]
        self.adoptions = [0] * len(handles)  # adopt commands sent to each member
        self.changed = True
        leaderboard.write(self.run_dir, self.tournament.table())

    def handle(self, message: dict[str, Any]) -> None:
        kind, k, payload = message["type"], message["member"], message["payload"]
        if kind == "error":
            raise WorkerFailed(f"pod:{k}", payload.get("halt") or payload.get("traceback", ""))
        if kind in ("report", "final"):
            self.monitor.on_report(Role.POD, k, payload, final=kind == "final")
            self.windows[k].add(payload["episode_returns"], payload["episode_lengths"], payload.get("episodes"))
        elif kind == "eval":
            self.on_eval(k, payload)

    def on_eval(self, k: int, event: dict[str, Any]) -> None:
        source = Path(event["checkpoint"])
        if event.get("adoptions", 0) < self.adoptions[k]:
            source.unlink(missing_ok=True)  # evaluated before its replacement arrived: stale
            return
        kept = leaderboard.entry_path(self.run_dir, k, event["env_steps"])
        os.replace(source, kept)
        entry = Entry(k, event["env_steps"], event["eval_return"], event["hparams"], str(kept),
                      time_s=round(time.time() - self.started_s, 3))
        decision = self.tournament.on_eval(entry)
        for old in decision.evicted:
            Path(old.checkpoint).unlink(missing_ok=True)
        if not decision.admitted:
            kept.unlink(missing_ok=True)
        if decision.replace is not None:
            # a private copy: the leaderboard may evict the source before the member loads it
            copy = self.run_dir / "members" / f"m{k}" / "adopt.pt"
            shutil.copyfile(decision.replace.source.checkpoint, copy)
            self.adoptions[k] += 1
            self.handles[k].send({"type": "adopt", "checkpoint": str(copy), "hparams": decision.replace.hparams})
        self.changed = True

    def target_reason(self) -> str | None:
        target = self.config.stop.target_return
        for k, window in enumerate(self.windows):
            mean = window.mean_return
            if target is not None and mean is not None and window.count >= 100 and mean >= target:
                if self.monitor.target_reached_s is None:
                    self.monitor.target_reached_s = time.time() - self.monitor.launched_s
                return f"target_return {target} reached by member {k} (mean of its last 100 episodes: {mean:.2f})"
        return None

    def other_reason(self) -> str | None:
        """The monitor's rules but its target: its window mixes every member's episodes."""
        reached = self.monitor.target_reached_s
        reason = self.monitor.stop_reason()
        if reason is not None and reason.startswith("target_return"):
            self.monitor.target_reached_s = reached
            return None
        return reason

    def save(self, final: bool = False) -> None:
        if self.changed or final:
            table = self.tournament.table()
            leaderboard.write(self.run_dir, table)
            if final:
                leaderboard.export_best(self.run_dir, table)
            self.changed = False


@contextlib.contextmanager
def _placement(graph: Graph) -> Iterator[Callable[[int], Any]]:
    """A factory of member handles for the configured launcher (with Ray up while it lasts)."""
    config = graph.config
    if config.launch.launcher == "inline":
        from srl.workers.member import make_member

        yield lambda k: InlineMember(make_member(config, k))
    elif config.launch.launcher == "ray":
        from srl.launch.ray_launcher import _connect, _ray
        from srl.launch.ray_members import RayMember
        from srl.launch.ray_placement import check_fits

        started = _connect(config, graph)
        try:
            check_fits(graph, _ray())
            yield lambda k: RayMember(config, k)
        finally:
            if started:
                _ray().shutdown()
    else:
        yield lambda k: ProcessMember(config, k)


def run_ensemble(graph: Graph, outputs: RunOutputs, monitor: RunMonitor) -> str:
    """Run every member until a stop rule fires; return the reason. Raises WorkerFailed."""
    with _placement(graph) as make_handle:
        return _run(graph, outputs, monitor, make_handle)


def _run(graph: Graph, outputs: RunOutputs, monitor: RunMonitor, make_handle: Callable[[int], Any]) -> str:
    config = graph.config
    handles: list[Any] = []
    restore_sigterm = interrupt_on_sigterm()  # SIGTERM stops the run as Ctrl-C does
    try:
        for spec in graph.workers:  # the pods the graph declares
            handles.append(make_handle(spec.index))
        outputs.start()
        manager = PopulationManager(graph, monitor, handles, outputs.started_s)
        try:
            reason = _supervise(manager, outputs, handles)
        except KeyboardInterrupt:
            reason = "interrupted"
        for h in handles:
            final = h.stop()
            if final is not None and final["type"] == "final":
                manager.handle(final)
        manager.save(final=True)
        return reason
    finally:
        restore_sigterm()
        if config.launch.launcher == "ray" and handles:
            from srl.launch.ray_members import write_placement

            write_placement(Path(str(config.run.run_dir)), handles)
        for h in handles:
            h.close()


def _supervise(manager: PopulationManager, outputs: RunOutputs, handles: list[Any]) -> str:
    names = [f"pod:{h.index}" for h in handles]
    wait = type(handles[0]).wait
    while True:
        wait(handles, POLL_S)
        for h in handles:
            for message in h.recv_all():
                manager.handle(message)
            if h.exitcode is not None:
                time.sleep(0.2)  # its error message may still be on the way
                for message in h.recv_all():
                    manager.handle(message)
                raise WorkerFailed(f"pod:{h.index}", f"process exited unexpectedly with code {h.exitcode}")
        for h in reversed(handles):  # the newest first: of two alike, Ray leaves the later one waiting
            if getattr(h, "unplaced", bool)():  # Ray: waiting for resources (judged by the handle)
                manager.monitor.on_unplaced(f"pod:{h.index}")
        silent = manager.monitor.silent_workers(names)
        if silent:
            raise WorkerFailed(silent[0], f"no heartbeat for {manager.config.launch.heartbeat_timeout_s} s")
        manager.save()
        outputs.tick(manager.monitor)
        reason = manager.target_reason() or manager.other_reason()
        if reason:
            return reason
