"""The run `srl eval` evaluates: its config and graph as it ran, and each lane's policy with the
weights it is judged by. A run of one policy is one lane named "" (srl.graph.graph.one_lane), so
one loader serves a run of one policy and a run of several.

A lane that trains is loaded from its newest usable checkpoint (run_dir/checkpoints, or a lane's
run_dir/policies/<name>/checkpoints); each one passed over (truncated, of another run, NaN,
outside checkpoints/) is named on one line (srl.checkpoint.load_latest). A lane that does not
train acts with the weights it ran with (policies.<name>.checkpoint) or as it is made (a scripted
policy); a league's pool as the run left it. `--snapshot NAME` puts a snapshot of the run's
self-play league in its learner's place.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from srl import checkpoint
from srl.api.policy import Policy
from srl.config import ConfigError, ExperimentConfig, load_saved_config
from srl.config.checks import build_config
from srl.envs.central_state import AgentStateBox
from srl.evaluation.opponents import league_snapshot, load_network, resolve_opponent, snapshot_names
from srl.graph import Graph, Lane, build_graph, make_policy

EVAL_RUN_DIR = "eval RUN_DIR"  # what names the directory in its errors (not run.resume=, whose function it shares)


@dataclass
class Trained:
    run_dir: Path
    graph: Graph
    policies: dict[str, Policy]  # lane name -> its policy, with the weights it is judged by
    versions: dict[str, int]  # lane name -> the version of those weights
    snapshot: str | None = None  # the league snapshot that acts in its learner's place

    @property
    def lanes(self) -> list[Lane]:
        return self.graph.lanes

    @property
    def one(self) -> bool:
        """A run of one policy: its lane spans the run, and `srl eval` reports it at the top level."""
        return self.lanes[0].spans_run

    @property
    def takes_every_seat(self) -> bool:
        """One policy for every seat of a turn-based game: against an opponent, it plays matches in
        which the seats alternate (srl.evaluation.run.score_against)."""
        space = self.graph.observation_space
        return self.one and isinstance(space, AgentStateBox) and bool(space.mask_dim)

    def opponent(self, against: str, lane: Lane, seed: int) -> Policy | None:
        """What plays `lane`'s agents against the policy evaluated: None (random), a scripted player,
        a snapshot of the run's self-play league, or (a run of one policy) a checkpoint file."""
        learner = self.learner()
        return resolve_opponent(
            against, self.run_dir, self.graph.config.env_kwargs.get("module"), lane.graph.observation_space,
            lane.graph.action_space, seed, network=lambda: network(learner if learner is not None else lane),
            files=self.one, hint="" if self.one else "; or all together (no --against)")

    def learner(self) -> Lane | None:
        """The lane a self-play league snapshots (policies.<name>.league.of), if any."""
        learners = [spec.league.of for spec in self.graph.config.policies.values() if spec.league is not None]
        return next((lane for lane in self.lanes if lane.name == learners[0]), None) if learners else None

    def take_snapshot(self, name: str) -> None:
        """The league's learner acts with the weights of snapshot `name` (or `best`, the highest rated,
        in run_dir/league.json) instead of its newest."""
        from srl.population.league import FILE

        learner = self.learner()
        if learner is None or not (self.run_dir / FILE).is_file():
            raise ConfigError(f"--snapshot {name}: {str(self.run_dir)!r} played no self-play league (no {FILE})")
        found = league_snapshot(self.run_dir, name)
        if found is None:  # a scripted opponent of the pool is played with --against NAME
            raise ConfigError(f"--snapshot {name}: no such snapshot in {self.run_dir / FILE} "
                              f"({', '.join(snapshot_names(self.run_dir)) or 'none'})")
        self.snapshot = found[0]
        self.policies[learner.name] = load_network(lambda: network(learner), found[1])
        self.versions[learner.name] = int(self.snapshot[1:])


def load(run_dir: Path) -> Trained:
    """The run in `run_dir`, every lane's policy loaded."""
    config = saved_config(run_dir)
    config.run.run_dir = str(run_dir)  # where its checkpoints are, wherever it ran (a lane's: srl.graph.lanes)
    graph = build_graph(config)
    loaded = {lane.name: _load(lane, run_dir) for lane in graph.lanes}
    return Trained(run_dir, graph, {name: policy for name, (policy, _) in loaded.items()},
                   {name: version for name, (_, version) in loaded.items()})


def saved_config(run_dir: Path) -> ExperimentConfig:
    """The config the run in `run_dir` ran with, checked; a ConfigError names the directory where it
    holds none, its config.yaml where that does not hold a valid config."""
    values = load_saved_config(run_dir, named_by=EVAL_RUN_DIR)
    try:
        return build_config(values)
    except ConfigError as e:
        raise ConfigError(f"{run_dir / 'config.yaml'}: {e}") from None


def network(lane: Lane) -> Policy:
    """A new network of `lane`'s policy (for a snapshot's or a checkpoint file's weights)."""
    return make_policy(lane.graph.config, lane.graph.observation_space, lane.graph.action_space)


def _load(lane: Lane, run_dir: Path) -> tuple[Policy, int]:
    """The lane's policy (the one build_graph checked, not another one) and its weights' version."""
    from srl.population.league import FILE as LEAGUE_FILE
    from srl.population.league_pool import LeaguePool

    assert lane.graph.checked is not None  # build_graph keeps the policy it checked for what tries weights on
    policy = lane.graph.checked.policy
    if not lane.graph.trains:  # it acted with these weights (build_graph loaded them), or as it is made
        if isinstance(policy, LeaguePool) and (run_dir / LEAGUE_FILE).is_file():
            policy.load_run(run_dir)  # a league's opponents as the run left them
        if lane.graph.weights_file is None:
            return policy.eval(), 0
        fixed = checkpoint.load_file(Path(lane.graph.weights_file), apply=lambda s: policy.load_state_dict(s["policy"]))
        return policy.eval(), int(fixed["version"])
    lane_dir = Path(str(lane.graph.config.run.run_dir))
    state = checkpoint.load_latest(lane_dir, lane.graph.config.run.run_id,
                                   apply=lambda s: policy.load_state_dict(s["policy"]))
    if state is None:
        whose = f"policy {lane.name!r} of " if lane.name else ""
        raise ConfigError(f"{whose}{str(run_dir)!r}: {checkpoint.nothing_to_load(lane_dir)}: nothing to evaluate")
    return policy.eval(), int(state["version"])
