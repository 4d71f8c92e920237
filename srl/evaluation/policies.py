"""`srl eval RUN_DIR` of a run with several policies (srl.graph.lanes): each policy loaded from its own
newest usable checkpoint (run_dir/policies/<name>), all acting together in one env for N episodes;
each policy's mean return per agent.

`--against random`: each policy in turn plays against random ones (every other policy's agents act
uniformly at random), beside the same episodes with a random player in its place: a trained
predator should catch more than a random one does, a trained prey be caught less (`return_mean`
against `random_return_mean`, same seeds). `--against heuristic` (the game's scripted player,
srl.evaluation.opponents.HEURISTICS), a registered scripted policy (random-legal,
connect4-lookahead) or a snapshot of a self-play league plays the others the same way. Random
players of a turn-based game play legal moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from srl import checkpoint
from srl.api.policy import Policy
from srl.config import ConfigError, load_saved_config
from srl.envs import make_vector_env, single_env_kwargs
from srl.evaluation.opponents import league_snapshot, load_network, resolve_opponent, snapshot_names
from srl.evaluation.play import play
from srl.evaluation.players import Actor, Player, RandomPlayer
from srl.evaluation.run import EVAL_RUN_DIR, saved_config
from srl.graph import Graph, Lane, build_graph, make_policy
from srl.population.league import FILE as LEAGUE_FILE
from srl.population.league_pool import LeaguePool


def is_multi_policy(run_dir: str | Path) -> bool:
    return bool(load_saved_config(Path(run_dir), named_by=EVAL_RUN_DIR).get("policies"))


def evaluate_policies(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True,
                      against: str | None = None, snapshot: str | None = None) -> dict[str, Any]:
    """`snapshot` (best, or a name in league.json): a self-play league's learner acts with that
    snapshot's weights instead of its newest; `against` may name a snapshot too."""
    run_dir = Path(run_dir)
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    graph = _graph(run_dir)
    trained = {lane.name: _load(lane, run_dir) for lane in graph.lanes}
    versions = {name: state["version"] for name, (_, state) in trained.items()}
    policies = {name: policy for name, (policy, _) in trained.items()}
    result: dict[str, Any] = {"run_dir": str(run_dir), "episodes": episodes, "policy_versions": versions}
    if snapshot is not None:
        learner, net, name = _snapshot(graph, run_dir, snapshot)
        policies[learner], versions[learner], result["snapshot"] = net, int(name[1:]), name
    if against is None:
        result["policies"] = _summary(_play(graph, policies, episodes, seed, deterministic))
        return result
    result["against"] = against
    result["policies"] = {}
    for name, policy in policies.items():
        others = {lane.name: _opponent(against, graph, lane, run_dir, seed) for lane in graph.lanes if lane.name != name}
        mine = _summary(_play(graph, {name: policy, **others}, episodes, seed, deterministic))
        instead = _summary(_play(graph, others, episodes, seed, deterministic))  # a random player in its place
        result["policies"][name] = {"return_mean": mine[name]["return_mean"],
                                    "won_drawn_lost": mine[name]["won_drawn_lost"],
                                    "random_return_mean": instead[name]["return_mean"],
                                    "opponents": {k: v for k, v in mine.items() if k != name}}
    return result


def _opponent(against: str, graph: Graph, lane: Lane, run_dir: Path, seed: int) -> Policy | None:
    """What plays `lane`'s agents against the policy evaluated: None (random), a scripted player
    or a snapshot of the run's self-play league (srl.evaluation.opponents)."""
    learner = _learner(graph)
    return resolve_opponent(
        against, run_dir, graph.config.env_kwargs.get("module", ""), lane.graph.observation_space,
        lane.graph.action_space, seed, network=lambda: _network(learner if learner is not None else lane), files=False,
        hint="; or all together (no --against)")


def _learner(graph: Graph) -> Lane | None:
    """The lane a self-play league snapshots (policies.<name>.league.of), if any."""
    learners = [spec.league.of for spec in graph.config.policies.values() if spec.league is not None]
    return next((lane for lane in graph.lanes if lane.name == learners[0]), None) if learners else None


def _snapshot(graph: Graph, run_dir: Path, name: str) -> tuple[str, Policy, str]:
    """(the league's learner, its network with the weights of snapshot `name` or the best rated, the
    snapshot's name), from run_dir/league.json."""
    from srl.population.league import FILE

    learner = _learner(graph)
    if learner is None or not (run_dir / FILE).is_file():
        raise ConfigError(f"--snapshot {name}: {str(run_dir)!r} played no self-play league (no {FILE})")
    found = league_snapshot(run_dir, name)
    if found is None:  # a scripted opponent of the pool is played with --against NAME
        raise ConfigError(f"--snapshot {name}: no such snapshot in {run_dir / FILE} "
                          f"({', '.join(snapshot_names(run_dir)) or 'none'})")
    return learner.name, load_network(lambda: _network(learner), found[1]), found[0]


def _network(lane: Lane) -> Policy:
    return make_policy(lane.graph.config, lane.graph.observation_space, lane.graph.action_space)


def _graph(run_dir: Path) -> Graph:
    config = saved_config(run_dir)
    config.run.run_dir = str(run_dir)  # the lanes' checkpoints are found under it (srl.graph.lanes.policy_config)
    return build_graph(config)


def _load(lane: Lane, run_dir: Path) -> tuple[Policy, dict[str, Any]]:
    c = lane.graph.config
    policy = _network(lane)
    if not lane.graph.trains:  # it acted with these weights, or as it is made (a scripted policy)
        if isinstance(policy, LeaguePool) and (run_dir / LEAGUE_FILE).is_file():
            policy.load_run(run_dir)  # a league's opponents as the run left them
        if lane.graph.weights_file is None:
            return policy.eval(), {"version": 0}
        return policy.eval(), checkpoint.load_file(Path(lane.graph.weights_file),
                                                   apply=lambda s: policy.load_state_dict(s["policy"]))
    state = checkpoint.load_latest(Path(str(c.run.run_dir)), c.run.run_id,
                                   apply=lambda s: policy.load_state_dict(s["policy"]))
    if state is None:
        raise ConfigError(f"policy {lane.name!r} of {str(run_dir)!r}: "
                          f"{checkpoint.nothing_to_load(Path(str(c.run.run_dir)))}: nothing to evaluate")
    return policy.eval(), state


def _play(graph: Graph, policies: Mapping[str, Policy | None], episodes: int, seed: int, deterministic: bool
          ) -> dict[str, list[float]]:
    """Each lane's mean return per agent, episode by episode; lanes not in `policies` act at random."""
    c = graph.config
    env = make_vector_env(c.env, single_env_kwargs(c.env_kwargs, c.env_backend), 1, wrappers=c.env_wrappers)
    players: list[Actor] = []
    for lane in graph.lanes:
        policy, rows = policies.get(lane.name), list(lane.rows)
        players.append(RandomPlayer(lane.graph.observation_space, graph.action_space, seed, rows=rows, own=lane.own_obs)
                       if policy is None else
                       Player(policy, name=lane.name, rows=rows, own=lane.own_obs, deterministic=deterministic))
    try:
        played = play(env, players, episodes, seed)
    finally:
        env.close()
    return {lane.name: [float(e.returns[list(lane.rows)].mean()) for e in played] for lane in graph.lanes}


def _summary(returns: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Mean and spread of each policy's returns, and its games won, drawn and lost (return > 0, 0,
    < 0: a two-player game's result)."""
    return {name: {"return_mean": float(np.mean(r)), "return_std": float(np.std(r)),
                   "won_drawn_lost": [int(np.sum(np.asarray(r) > 0)), int(np.sum(np.asarray(r) == 0)),
                                      int(np.sum(np.asarray(r) < 0))]}
            for name, r in returns.items()}
