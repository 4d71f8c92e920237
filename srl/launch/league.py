"""The controller's part of a self-play league (config policies.<name>.league, srl.league).

Every `snapshot_interval_updates` of the learner, its newest checkpoint is copied to
run_dir/league/v<version>.pt and joins the pool; the actors' league-pool policy
(srl.models.league_pool) rereads league.json and draws its opponents from it. The actors report
each game under the snapshot that played it (srl.workers.lanes: the league policy's results by
tag); the learner's result is the other side of it, and moves the snapshot's and the learner's Elo.
league.json is rewritten when something changed, and a resumed run goes on with it.

The keeper is an observer of the run monitor (srl.launch.observers): it reads the reports there.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from srl import checkpoint
from srl.config import ExperimentConfig, LeagueSpec
from srl.graph.lanes import POLICIES_DIR
from srl.launch.observers import ObservedReport
from srl.league import FILE, League
from srl.streams.control import Role

SNAPSHOTS_DIR = "league"  # run_dir/league/v<version>.pt


class LeagueKeeper:
    def __init__(self, config: ExperimentConfig, opponents: str, spec: LeagueSpec) -> None:
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
        self.changed = not resuming  # an empty table is written at once: the actors read it
        self.save()

    def on_report(self, report: ObservedReport) -> None:
        """The opponents' games in an actor's (or pod's) report; its learner's new versions."""
        if report.role in (Role.ACTOR, Role.POD):
            episodes = report.payload.get("policies", {}).get(self.opponents)
            if episodes is not None:
                self.on_results(episodes.get("results", {}))
        if report.leads and report.policy == self.learner:
            self.on_learner(report.payload, report.env_steps)

    def on_metrics(self) -> dict[str, Any]:
        """league.json as often as the metrics (when changed), and the learner's Elo in them."""
        self.save()
        return {"league/learner_elo": self.league.learner_elo}

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]:
        return []  # the actors reread league.json (srl.models.league_pool)

    def on_finish(self) -> None:
        self.save()

    def on_learner(self, payload: dict[str, Any], env_steps: int) -> None:
        """A report of the learner's trainer: a snapshot of its newest checkpoint when it is due."""
        if payload.get("policy_version", 0) < self.next_version:
            return
        meta = checkpoint.latest_meta(self.run_dir / POLICIES_DIR / self.learner)
        if meta is None or meta["version"] < self.next_version or f"v{meta['version']}" in self.league.snapshots:
            return  # its checkpoint is older than the interval: the next one
        source = self.run_dir / POLICIES_DIR / self.learner / checkpoint.checkpoint_dir(Path()) / meta["path"]
        target = self.run_dir / SNAPSHOTS_DIR / f"v{meta['version']}.pt"
        target.parent.mkdir(exist_ok=True)
        shutil.copyfile(source, target)
        self.league.add(meta["version"], env_steps, str(target.relative_to(self.run_dir)))
        self.next_version = meta["version"] + self.spec.snapshot_interval_updates
        self.changed = True

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

    def save(self) -> None:
        if self.changed:
            self.league.save(self.file)
            self.changed = False
