"""Win / draw / loss of a policy against random legal moves (or a given opponent) in a turn-based game.

For games built by the "pettingzoo-aec" env (srl.envs.pettingzoo_aec): the policy plays one
seat, a random player the others; the seat rotates over the games (game g: seat g % agents), so
first-move advantage averages out. A game is won if the policy's seat ends with a positive return.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from srl.api.policy import Policy
from srl.envs import make_vector_env
from srl.envs.central_state import AgentStateBox
from srl.models.scripted import random_legal


def score_against(
    policy: Policy | None, env: str, env_kwargs: Mapping[str, Any], games: int, seed: int,
    opponent: Policy | None = None,
) -> dict[str, float]:
    """{"win", "draw", "loss"} fractions over `games` games, one per env, all played at once.
    `policy=None` measures a random player in its place (the baseline). The other seats play
    uniformly random legal moves, or `opponent` (a scripted player of srl.models.scripted, a
    frozen snapshot) where given."""
    venv = make_vector_env(env, env_kwargs, num_envs=games, env_index_offset=0)
    space = venv.observation_space
    if not isinstance(space, AgentStateBox) or not space.mask_dim:
        venv.close()
        raise ValueError(f"score_against needs a turn-based 'pettingzoo-aec' env, {env!r} has {space}")
    agents = len(venv.agents)
    rng = np.random.default_rng(seed)
    seat: np.ndarray = np.zeros((games, agents), bool)
    seat[np.arange(games), np.arange(games) % agents] = True
    seat = seat.reshape(-1)
    returns, finished = np.zeros(venv.num_rows), np.zeros(games, bool)
    final = np.zeros(games)
    try:
        obs = venv.reset(seed=seed)
        while not finished.all():
            assert isinstance(obs, np.ndarray)  # an AgentStateBox: one array
            random_moves = random_legal(obs[:, space.own_dim - space.mask_dim : space.own_dim], rng)
            mine, theirs = (random_moves if p is None else _moves(p, obs) for p in (policy, opponent))
            action = np.where(seat, mine, theirs)
            step = venv.step(action)
            returns += step.reward
            done = (step.terminated | step.truncated).reshape(games, agents).all(axis=1) & ~finished
            final[done] = returns.reshape(games, agents)[done][seat.reshape(games, agents)[done]]
            finished |= done
            obs = step.obs
    finally:
        venv.close()
    return {
        "win": float(np.mean(final > 0)),
        "draw": float(np.mean(final == 0)),
        "loss": float(np.mean(final < 0)),
    }


def _moves(policy: Policy, obs: np.ndarray) -> np.ndarray:
    with torch.inference_mode():
        return policy.rollout(torch.from_numpy(obs), deterministic=True)["action"].numpy()
