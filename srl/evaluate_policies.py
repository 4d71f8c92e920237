"""`srl eval RUN_DIR` of a run with several policies (srl.lanes): each policy loaded from its own
newest usable checkpoint (run_dir/policies/<name>), all acting together in one env for N episodes;
each policy's mean return per agent.

`--against random`: each policy in turn plays against random ones (every other policy's agents act
uniformly at random), beside the same episodes with every agent random: a trained predator should
catch more than a random one does, a trained prey be caught less (`return_mean` against
`random_return_mean`, same seeds). Random players of a turn-based game play legal moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl import checkpoint
from srl.api.policy import Policy
from srl.checks import build_config
from srl.config import ConfigError, load_saved_config
from srl.envs import make_vector_env, single_env_kwargs
from srl.envs.central_state import AgentStateBox
from srl.graph import Graph, Lane, build_graph, make_policy, space_spec
from srl.models.scripted import random_legal
from srl.spaces import Obs, map_obs


def is_multi_policy(run_dir: str | Path) -> bool:
    return bool(load_saved_config(Path(run_dir)).get("policies"))


def evaluate_policies(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True,
                      against: str | None = None) -> dict[str, Any]:
    run_dir = Path(run_dir)
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    if against not in (None, "random"):
        raise ConfigError(f"--against {against!r}: a run with several policies plays them against random ones "
                          "(--against random) or against each other (no --against)")
    graph = _graph(run_dir)
    trained = {lane.name: _load(graph, lane, run_dir) for lane in graph.lanes}
    versions = {name: state["version"] for name, (_, state) in trained.items()}
    policies = {name: policy for name, (policy, _) in trained.items()}
    result: dict[str, Any] = {"run_dir": str(run_dir), "episodes": episodes, "policy_versions": versions}
    if against is None:
        result["policies"] = _summary(_play(graph, policies, episodes, seed, deterministic))
        return result
    every_random = _summary(_play(graph, {}, episodes, seed, deterministic))
    result["against"] = "random"
    result["policies"] = {}
    for name, policy in policies.items():
        mine = _summary(_play(graph, {name: policy}, episodes, seed, deterministic))
        result["policies"][name] = {"return_mean": mine[name]["return_mean"],
                                    "random_return_mean": every_random[name]["return_mean"],
                                    "opponents": {k: v for k, v in mine.items() if k != name}}
    return result


def _graph(run_dir: Path) -> Graph:
    try:
        config = build_config(load_saved_config(run_dir))
    except ConfigError as e:
        raise ConfigError(f"{run_dir / 'config.yaml'}: {e}") from None
    config.run.run_dir = str(run_dir)  # the lanes' checkpoints are found under it (srl.lanes.policy_config)
    return build_graph(config)


def _load(graph: Graph, lane: Lane, run_dir: Path) -> tuple[Policy, dict[str, Any]]:
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
        raise ConfigError(f"{str(run_dir)!r} has no checkpoint of policy {lane.name!r} to evaluate")
    return policy.eval(), state


def _play(graph: Graph, policies: dict[str, Policy], episodes: int, seed: int, deterministic: bool
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
                    action[rows] = policy.rollout(_own(obs, rows, lane), deterministic=deterministic)["action"].numpy()
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


def _own(obs: Obs, rows: list[int], lane: Lane) -> Any:
    """A lane's rows as its policy reads them (tensors): a padded vector (srl.envs.vector) cut to its length."""
    space = lane.graph.observation_space
    if isinstance(obs, np.ndarray) and obs.ndim == 2 and isinstance(space, gym.spaces.Box):
        return torch.from_numpy(obs[rows, : space.shape[0]])
    return map_obs(lambda a: torch.from_numpy(a[rows]), obs)


def _summary(returns: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {name: {"return_mean": float(np.mean(r)), "return_std": float(np.std(r))} for name, r in returns.items()}
