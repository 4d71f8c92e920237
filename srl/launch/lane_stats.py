"""The controller's statistics of one policy: a lane of the run (srl.graph.lanes), the same object for a
run's one policy (the lane named "") as for each of several.

The run monitor (srl.launch.monitor) holds one per lane and hands each the reports that are its
own: its leading trainer's (or pod's) reports, its part of an actor's episodes and of an
evaluation round. A lane counts its updates and keeps its leader's last and final report; the
run's own counters stay the monitor's. What a lane adds to the metrics and summary.json:
- the run's one policy: its losses, under their own names (`losses/policy_loss`); its other
  counts are the run's (`episode_return_mean`, `policy_version`, ... of the monitor);
- one of several: its own counts and losses under its name (`<policy>/episode_return_mean`,
  `<policy>/losses/policy_loss`), and an entry of summary.json's `policies`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from srl.monitor.episodes import WINDOW, ReturnWindow
from srl.streams.control import Role
from srl.streams.reports import Key, PolicyEval, TrainsReport

if TYPE_CHECKING:
    from srl.config import ExperimentConfig
    from srl.graph import Lane


@dataclass
class LaneStats:
    name: str  # the policy's; "" for a run's one policy
    workers: frozenset[str]  # its workers' run names
    leaders: frozenset[str]  # those that count its updates: its first trainer (it speaks for a group), its pods
    trains: bool = True  # False: a policy that only acts (no trainer, no updates)
    episodes: ReturnWindow = field(default_factory=lambda: ReturnWindow(WINDOW))  # of its agents (several policies)
    trainer: TrainsReport | None = None  # its leader's last report that made updates (or its first)
    updates: int = 0  # this launch's
    final: TrainsReport | None = None  # its leader's final report
    eval: PolicyEval | None = None  # its part of the last evaluation round (several policies)

    @classmethod
    def of(cls, lane: Lane) -> LaneStats:
        leaders = {lane.names[w.name] for w in lane.graph.workers if w.name == "trainer:0" or w.role == Role.POD}
        return cls(lane.name, frozenset(lane.names.values()), frozenset(leaders), trains=lane.graph.trains)

    @classmethod
    def one_policy(cls, config: ExperimentConfig) -> LaneStats:
        """The run's one policy where its graph is not at hand (a monitor made alone): its first
        trainer and its pods lead."""
        leaders = frozenset({"trainer:0", *(f"pod:{k}" for k in range(config.pod.ensemble.population))})
        return cls("", leaders, leaders)

    @property
    def named(self) -> bool:
        """One of several policies: its counts are its own, beside the run's."""
        return bool(self.name)

    def on_leader_report(self, payload: TrainsReport, final: bool) -> None:
        self.updates += payload[Key.UPDATES]
        if final:
            self.final = payload
        if payload[Key.UPDATES] or self.trainer is None:
            self.trainer = payload

    def updates_made(self) -> int:
        """What max_updates is held against for it: its parameters' version, which counts a resumed
        run's earlier updates and ones a restarted life never reported."""
        return max(self.updates, self.version())

    def version(self) -> int:
        """Its parameters' version, as its leader last reported (0 before)."""
        return 0 if self.trainer is None else self.trainer.get(Key.POLICY_VERSION, 0)

    def metrics(self) -> dict[str, Any]:
        # the algorithm's stats, merged into the leader's reports (srl.streams.reports.with_stats)
        losses = {self.key(k): v for k, v in (self.trainer or {}).items() if "/" in k}
        if not self.named:  # the run's one policy: its other counts are the run's
            return losses
        return {self.key("episode_return_mean"): self.episodes.mean_return,
                self.key("episode_length_mean"): self.episodes.mean_length, self.key("episodes"): self.episodes.count,
                self.key("policy_version"): self.version(), self.key("updates"): self.updates,
                **losses}  # fmt: skip

    def eval_metrics(self) -> dict[str, Any]:
        if not self.named:  # the run's one policy: the run's eval/... (RunMonitor)
            return {}
        returns = [] if self.eval is None else self.eval[Key.EPISODE_RETURNS]
        return {self.key("eval/episode_return_mean"): sum(returns) / len(returns) if returns else None,
                self.key("eval/policy_version"): None if self.eval is None else self.eval[Key.POLICY_VERSION]}

    def summary(self) -> dict[str, Any]:
        """Its entry in summary.json's `policies`: its episodes, updates and final parameters."""
        return {"episode_return_mean": self.episodes.mean_return, "episodes": self.episodes.count,
                "updates": self.updates, "policy_version": None if self.final is None else self.final.get(Key.POLICY_VERSION),
                "params_sha256": None if self.final is None else self.final.get(Key.PARAMS_SHA256)}

    def key(self, name: str) -> str:
        """A metric of its own: under its name, or as it is for the run's one policy."""
        return f"{self.name}/{name}" if self.named else name
