"""The controller's part of a self-play league (config policies.<name>.league, srl.population.league).

The keeper subscribes to the learner's parameters as a policy worker does, and every
`snapshot_interval_updates` of the learner freezes the weights it holds then as snapshot
v<version>: written to run_dir/league/v<version>.pt (for `srl eval --against` and a resume), and
sent with league.json's table to the league's acting workers on the league's streams
(srl.population.league_streams), whose league-pool policy (srl.population.league_pool) draws its
opponents from it. No file crosses between nodes: a league runs on Ray over tcp with no shared
run directory. The actors report each game under the snapshot that played it (srl.workers.lanes:
the league policy's results by tag); the learner's result is the other side of it, and moves the
snapshot's and the learner's Elo. league.json is rewritten when something changed, and a resumed
run goes on with it and its snapshots' files.

The keeper is an observer of the run monitor (srl.launch.observers): it reads the reports there,
and its streams are opened on the controller's transport when the launch has one (`connect`).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from srl import checkpoint
from srl.config import ExperimentConfig, LeagueSpec
from srl.launch.observers import ObservedReport
from srl.population.league import FILE, League
from srl.population.league_streams import ASK_S, IN, OUT, SNAPSHOT, in_schema, table_message
from srl.storage import atomic_file
from srl.streams.control import Role
from srl.streams.params import ParamSubscriber, state_frames
from srl.streams.prefixed import PrefixedTransport
from srl.streams.reports import ActorReport, Key, TrainsReport
from srl.streams.schema import checked
from srl.streams.transport import Transport

SNAPSHOTS_DIR = "league"  # run_dir/league/v<version>.pt


class LeagueKeeper:
    def __init__(self, config: ExperimentConfig, opponents: str, spec: LeagueSpec, graph: Any = None) -> None:
        """`graph`: the run's (its lanes: the learner's network and streams); None keeps the table
        only (no snapshot is taken: a test of the records)."""
        self.run_dir = Path(str(config.run.run_dir))
        self.file = self.run_dir / FILE
        self.learner, self.opponents, self.spec = spec.of, opponents, spec
        resuming = config.run.resume is not None and self.file.is_file()
        self.league = League.load(self.file, config.run.seed) if resuming else \
            League(spec.pool_size, spec.choose, seed=config.run.seed)
        for policy in spec.scripted:
            if policy not in self.league.snapshots:  # a resumed run keeps those it had, with their records
                self.league.add_scripted(policy)
        newest = max((s.version for s in self.league.snapshots.values() if not s.scripted), default=0)
        self.next_version = newest + spec.snapshot_interval_updates
        self.due_env_steps: int | None = None  # the learner has reached next_version at these env steps
        self.net: torch.nn.Module | None = None
        self.prefixes = ("", "")  # the learner's lane's, the league's
        if graph is not None:
            lanes = {lane.name: lane for lane in graph.lanes}
            learner = lanes[spec.of].graph
            from srl.graph import make_policy

            with torch.random.fork_rng():  # the controller's RNG as it was
                self.net = make_policy(learner.config, learner.observation_space, learner.action_space)
            self.prefixes = (lanes[spec.of].prefix, lanes[opponents].prefix)
        self.frames: dict[int, list[bytes]] = {}  # the pooled snapshots' weights, to send
        if resuming and self.net is not None:
            self._reload_pool()
        self.weights: ParamSubscriber | None = None
        self.out: Any = None
        self.asks: Any = None
        self.sent_s: dict[int, float] = {}  # version -> when its snapshot went out last
        self.table_sent_s, self.seq = -math.inf, 0
        self.changed = not resuming
        self.save()

    def connect(self, transport: Transport) -> None:
        """Its streams on the controller's transport: the learner's parameters in, the league out."""
        if self.net is None:
            return
        learner, own = self.prefixes
        self.weights = ParamSubscriber(PrefixedTransport(transport, learner), self.net)
        self.out = transport.publisher(own + OUT)
        self.asks = checked(transport, transport.receiver(own + IN), own + IN, in_schema())

    def on_report(self, report: ObservedReport) -> None:
        """The opponents' games in an actor's report (a pod plays one policy); its learner's new versions."""
        if report.role == Role.ACTOR:
            episodes = report.as_type(ActorReport).get(Key.POLICIES, {}).get(self.opponents)
            if episodes is not None:
                self.on_results(episodes.get(Key.RESULTS, {}))
        if report.leads and report.policy == self.learner:
            self.on_learner(report.as_type(TrainsReport), report.env_steps)
        self.poll()

    def on_metrics(self) -> dict[str, Any]:
        """league.json as often as the metrics (when changed), and the learner's Elo in them. (Its
        streams are polled with the reports, which come while the transport is open: the last
        metrics are written after it closed.)"""
        self.save()
        return {"league/learner_elo": self.league.learner_elo}

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]:
        return []  # the league goes out on its own streams (srl.population.league_streams)

    def on_finish(self) -> None:
        self.save()

    def on_learner(self, payload: TrainsReport, env_steps: int) -> None:
        """A report of the learner's trainer: a snapshot is due once it reached the next version."""
        if payload.get(Key.POLICY_VERSION, 0) >= self.next_version and self.due_env_steps is None:
            self.due_env_steps = env_steps

    def on_results(self, results: dict[str, list[int]]) -> None:
        """The league policy's [wins, draws, losses] by snapshot version: the learner's are the other way round."""
        for tag, (wins, draws, losses) in results.items():
            name = self.league.named(int(float(tag)))
            if name is None:  # -1: no opponent yet (random moves)
                continue
            for result, games in ((-1.0, wins), (0.0, draws), (1.0, losses)):
                for _ in range(games):
                    self.league.record(name, result)
            self.changed = True

    # -- the league's streams ---------------------------------------------------------------------

    def poll(self) -> None:
        """The learner's newest weights; a snapshot when due; the snapshots asked for; the table
        every refresh_s (a worker that missed it, or joined late, has it by then)."""
        if self.weights is None or self.net is None:
            return
        self.weights.poll(self.net)
        version = self.weights.version
        if self.due_env_steps is not None and version >= self.next_version:
            self._snapshot(version, self.due_env_steps)
        now = time.monotonic()
        for version in sorted({m.header[1] for m in self.asks.recv_all()}):
            if version in self.frames and now - self.sent_s.get(version, -math.inf) >= ASK_S / 2:
                self._send_snapshot(version)
        if now - self.table_sent_s >= self.spec.refresh_s:
            self._send_table()

    def _snapshot(self, version: int, env_steps: int) -> None:
        """Freeze the weights held (version `version`) as a snapshot: its file, the table, the workers."""
        assert self.net is not None
        self.due_env_steps = None
        self.next_version = version + self.spec.snapshot_interval_updates
        if f"v{version}" in self.league.snapshots:
            return
        target = self.run_dir / SNAPSHOTS_DIR / f"v{version}.pt"
        target.parent.mkdir(exist_ok=True)
        state = {"version": version, "env_steps": env_steps, "algorithm": {},
                 "policy": {k: t.detach().cpu().clone() for k, t in self.net.state_dict().items()}}
        with atomic_file(target) as f:  # srl eval --against v<version>, and a resume, read it
            torch.save(state, f)
        self.league.add(version, env_steps, str(target.relative_to(self.run_dir)))
        self.frames[version] = [bytes(frame) for frame in state_frames(self.net)]
        self._keep_pooled()
        self.changed = True
        self._send_table()  # the table first: a worker takes the snapshots its pool names
        self._send_snapshot(version)

    def _reload_pool(self) -> None:
        """A resumed run: the pooled snapshots' weights from their files (this controller's own)."""
        assert self.net is not None
        net = self.net
        for name in self.league.pool:
            snap = self.league.snapshots[name]
            if not snap.scripted:
                checkpoint.load_file(self.run_dir / snap.checkpoint, apply=lambda state: net.load_state_dict(state["policy"]))
                self.frames[snap.version] = [bytes(frame) for frame in state_frames(net)]

    def _keep_pooled(self) -> None:
        pooled = {self.league.snapshots[n].version for n in self.league.pool}
        self.frames = {v: f for v, f in self.frames.items() if v in pooled}

    def _send_snapshot(self, version: int) -> None:
        self.out.send((SNAPSHOT, version), self.frames[version])
        self.sent_s[version] = time.monotonic()

    def _send_table(self) -> None:
        self.seq += 1
        self.out.send(*table_message(self.league.to_json(), self.seq))
        self.table_sent_s = time.monotonic()

    def save(self) -> None:
        if self.changed:
            self.league.save(self.file)
            self.changed = False
