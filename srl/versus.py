"""Win / draw / loss of a policy against uniformly random legal moves in a turn-based game.

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


def random_legal(own_masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random allowed action per row of masks [rows, actions] (0 where none)."""
    noise = rng.random(own_masks.shape) * (own_masks > 0.5)
    return noise.argmax(axis=1)


def score_vs_random(
    policy: Policy | None, env: str, env_kwargs: Mapping[str, Any], games: int, seed: int
) -> dict[str, float]:
    """{"win", "draw", "loss"} fractions over `games` games, one per env, all played at once.
    `policy=None` measures a random player against random players (the baseline)."""
    venv = make_vector_env(env, env_kwargs, num_envs=games, env_index_offset=0)
    space = venv.observation_space
    if not isinstance(space, AgentStateBox) or not space.mask_dim:
        venv.close()
        raise ValueError(f"score_vs_random needs a turn-based 'pettingzoo-aec' env, {env!r} has {space}")
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
            action = random_legal(obs[:, space.own_dim - space.mask_dim : space.own_dim], rng)
            if policy is not None:
                with torch.inference_mode():
                    mine = policy.rollout(torch.from_numpy(obs), deterministic=True)["action"].numpy()
                action = np.where(seat, mine, action)
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
