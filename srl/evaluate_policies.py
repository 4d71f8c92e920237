"""`srl eval RUN_DIR` of a run with several policies (srl.lanes): each policy loaded from its own
newest usable checkpoint (run_dir/policies/<name>), all acting together in one env for N episodes;
each policy's mean return per agent.

`--against random`: each policy in turn plays against random ones (every other policy's agents act
uniformly at random), beside the same episodes with a random player in its place: a trained
predator should catch more than a random one does, a trained prey be caught less (`return_mean`
against `random_return_mean`, same seeds). `--against heuristic` (the game's scripted player,
srl.evaluate.HEURISTICS) or a registered scripted policy (random-legal, connect4-lookahead) plays
the others the same way. Random players of a turn-based game play legal moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from srl import checkpoint
from srl.api.policy import Policy
from srl.config import ConfigError, load_saved_config
from srl.envs import make_vector_env, single_env_kwargs
from srl.envs.central_state import AgentStateBox
from srl.evaluate import EVAL_RUN_DIR, saved_config, scripted_player
from srl.graph import Graph, Lane, build_graph, make_policy, space_spec
from srl.models.scripted import random_legal, scripted_names
from srl.spaces import Obs, map_obs


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
        learner, net, name = _snapshot(graph, run_dir, snapshot, "--snapshot")
        policies[learner], versions[learner], result["snapshot"] = net, int(name[1:]), name
    if against is None:
        result["policies"] = _summary(_play(graph, policies, episodes, seed, deterministic))
        return result
    result["against"] = against
    result["policies"] = {}
    for name, policy in policies.items():
        others = {lane.name: _opponent(against, graph, lane, seed) for lane in graph.lanes if lane.name != name}
        mine = _summary(_play(graph, {name: policy, **others}, episodes, seed, deterministic))
        instead = _summary(_play(graph, others, episodes, seed, deterministic))  # a random player in its place
        result["policies"][name] = {"return_mean": mine[name]["return_mean"],
                                    "won_drawn_lost": mine[name]["won_drawn_lost"],
                                    "random_return_mean": instead[name]["return_mean"],
                                    "opponents": {k: v for k, v in mine.items() if k != name}}
    return result


def _opponent(against: str, graph: Graph, lane: Lane, seed: int) -> Policy | None:
    """What plays `lane`'s agents against the policy evaluated: None (random), or a scripted
    player: `heuristic` (the game's, srl.evaluate.HEURISTICS) or a registered scripted policy."""
    if against == "random":
        return None
    if against == "best" or (against[:1] == "v" and against[1:].isdigit()):  # a snapshot of a self-play league
        return _snapshot(graph, Path(str(graph.config.run.run_dir)), against, "--against")[1]
    player = scripted_player(against, graph.config.env_kwargs.get("module", ""), lane.graph.observation_space,
                             lane.graph.action_space, seed, otherwise="a scripted policy")
    if player is None:
        raise ConfigError(f"--against {against!r}: a run with several policies plays each against random ones "
                          "(random), the game's heuristic player (heuristic) or a scripted policy "
                          f"({', '.join(scripted_names())}); or all together (no --against)")
    return player


def _snapshot(graph: Graph, run_dir: Path, name: str, option: str) -> tuple[str, Policy, str]:
    """(the league's learner, its network with the weights of snapshot `name` or the best rated, the
    snapshot's name), from run_dir/league.json."""
    from srl.league import FILE, League

    learners = [spec.league.of for spec in graph.config.policies.values() if spec.league is not None]
    if not learners or not (run_dir / FILE).is_file():
        raise ConfigError(f"{option} {name}: {str(run_dir)!r} played no self-play league (no {FILE})")
    league = League.load(run_dir / FILE)
    snap = league.best() if name == "best" else league.snapshots.get(name)
    if snap is None or snap.scripted:  # a scripted opponent of the pool is played with --against NAME
        learned = [n for n, s in league.snapshots.items() if not s.scripted]
        raise ConfigError(f"{option} {name}: no such snapshot in {run_dir / FILE} ({', '.join(learned) or 'none'})")
    lane = next(lane for lane in graph.lanes if lane.name == learners[0])
    net = make_policy(lane.graph.config, lane.graph.observation_space, lane.graph.action_space)
    checkpoint.load_file(run_dir / snap.checkpoint, apply=lambda state: net.load_state_dict(state["policy"]))
    return lane.name, net.eval(), snap.name


def _graph(run_dir: Path) -> Graph:
    config = saved_config(run_dir)
    config.run.run_dir = str(run_dir)  # the lanes' checkpoints are found under it (srl.lanes.policy_config)
    return build_graph(config)


def _load(lane: Lane, run_dir: Path) -> tuple[Policy, dict[str, Any]]:
    c = lane.graph.config
    policy = make_policy(c, lane.graph.observation_space, lane.graph.action_space)
    if not lane.graph.trains:  # it acted with these weights, or as it is made (a scripted policy)
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
    graph.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    spec = space_spec(graph.action_space)
    returns: dict[str, list[float]] = {lane.name: [] for lane in graph.lanes}
    try:
        obs = env.reset(seed=seed)
        running = np.zeros(env.num_rows)
        while len(returns[graph.lanes[0].name]) < episodes:
            action = np.zeros((env.num_rows, *spec.shape), spec.dtype)
            for lane in graph.lanes:
                rows = list(lane.rows)
                policy = policies.get(lane.name)
                if policy is None:
                    action[rows] = _random(graph, lane, obs, rows, rng)
                    continue
                with torch.inference_mode():
                    own = map_obs(torch.from_numpy, lane.own_obs(obs))
                    action[rows] = policy.rollout(own, deterministic=deterministic)["action"].numpy()
            step = env.step(action)
            running += step.reward
            obs = step.obs
            if (step.terminated | step.truncated).any():  # one env: every row ends together
                for lane in graph.lanes:
                    returns[lane.name].append(float(running[list(lane.rows)].mean()))
                running[:] = 0
    finally:
        env.close()
    return returns


def _random(graph: Graph, lane: Lane, obs: Obs, rows: list[int], rng: np.random.Generator) -> Any:
    """Random actions of a lane's rows: legal ones where its rows carry an action mask (turn-based
    games, srl.envs.pettingzoo_aec), else the action space's."""
    space = lane.graph.observation_space
    if isinstance(space, AgentStateBox) and space.mask_dim and isinstance(obs, np.ndarray):
        return random_legal(obs[rows, space.own_dim - space.mask_dim : space.own_dim], rng)
    return [graph.action_space.sample() for _ in rows]


def _summary(returns: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Mean and spread of each policy's returns, and its games won, drawn and lost (return > 0, 0,
    < 0: a two-player game's result)."""
    return {name: {"return_mean": float(np.mean(r)), "return_std": float(np.std(r)),
                   "won_drawn_lost": [int(np.sum(np.asarray(r) > 0)), int(np.sum(np.asarray(r) == 0)),
                                      int(np.sum(np.asarray(r) < 0))]}
            for name, r in returns.items()}
