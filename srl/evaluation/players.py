"""Who acts in an evaluation: a policy with its weights (`Player`) or a random one (`RandomPlayer`),
each for its rows of the env (srl.api.env: row = env_index * agents + agent_index).

A trained network, a scripted player (srl.models.scripted), a league snapshot and a checkpoint are
all `Policy`s, so `Player` serves them all; `RandomPlayer` draws from the action space, or from the
legal moves where the rows carry an action mask (turn-based games, srl.envs.pettingzoo_aec).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from srl import devices
from srl.api.policy import Policy
from srl.envs.central_state import AgentStateBox
from srl.models.scripted import random_legal
from srl.spaces import Obs, map_obs, num_rows
from srl.streams.params import FixedParams, ParamSubscriber

ALL_ROWS = slice(None)


class Actor(Protocol):
    """What `srl.evaluation.play` steps: actions for its rows, told where their episodes ended."""

    rows: list[int] | slice

    def act(self, obs: Obs) -> Any: ...

    def episodes_ended(self, done: np.ndarray) -> None: ...


@dataclass
class Player:
    """A policy and where its weights come from (a parameter stream in a run; FixedParams for a
    checkpoint, a snapshot or a scripted player), acting for `rows` of the env (all of them with
    one policy); `own` cuts its rows' observations out of the env's (srl.graph.Lane.own_obs)."""

    policy: Policy
    params: ParamSubscriber | FixedParams = field(default_factory=FixedParams)
    name: str = ""
    rows: list[int] | slice = field(default_factory=lambda: ALL_ROWS)
    own: Callable[[Obs], Obs] | None = None  # None: its rows as they are
    deterministic: bool = True  # the most likely actions (`srl eval --stochastic`: sampled)

    def __post_init__(self) -> None:
        self.policy.eval()
        self.device = devices.of(self.policy)  # where its observations go
        self.cut = own_rows(self.rows) if self.own is None else self.own
        # All rows of one array, on the CPU: the observation goes to torch as it is, the action
        # comes back as it is. py-spy of `srl eval` on CartPole: the general path's map_obs,
        # as_tensor(device=), .cpu() and an inference-mode context per step cost 10% of a step.
        self._direct = self.own is None and self.rows == ALL_ROWS and self.device.type == "cpu"

    def act(self, obs: Obs) -> np.ndarray:
        """Its actions for its rows of the env's observation: one forward, nothing else in torch."""
        if torch.is_inference_mode_enabled():  # play() steps its whole loop so: no context per step
            return self._act(obs)
        with torch.inference_mode():
            return self._act(obs)

    def _act(self, obs: Obs) -> np.ndarray:
        if self._direct and type(obs) is np.ndarray:
            return self.policy.rollout(torch.from_numpy(obs), deterministic=self.deterministic)["action"].numpy()
        mine = map_obs(lambda a: torch.as_tensor(a, device=self.device), self.cut(obs))  # one tensor, or one per leaf
        return self.policy.rollout(mine, deterministic=self.deterministic)["action"].cpu().numpy()

    def episodes_ended(self, done: np.ndarray) -> None:
        self.policy.episodes_ended(done)  # a recurrent policy starts those rows over


class RandomPlayer:
    """Uniformly random actions for `rows`: legal ones where the observation space carries an
    action mask (`AgentStateBox.action_mask`), else the action space's."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, seed: int,
                 rows: list[int] | slice = ALL_ROWS, own: Callable[[Obs], Obs] | None = None) -> None:
        self.rows = rows
        self.cut = own_rows(rows) if own is None else own
        self.turns = observation_space if isinstance(observation_space, AgentStateBox) and observation_space.mask_dim else None
        self.action_space = copy.deepcopy(action_space)  # seeded here, not the caller's
        self.action_space.seed(seed)
        self.rng = np.random.default_rng(seed)

    def act(self, obs: Obs) -> np.ndarray:
        mine = self.cut(obs)
        if self.turns is not None and isinstance(mine, np.ndarray):
            return random_legal(self.turns.action_mask(mine), self.rng)
        return np.stack([np.asarray(self.action_space.sample()) for _ in range(num_rows(mine))])

    def episodes_ended(self, done: np.ndarray) -> None:
        pass


def own_rows(rows: list[int] | slice) -> Callable[[Obs], Obs]:
    """What cuts `rows` out of the env's observation (one array, or one per leaf)."""
    if isinstance(rows, slice) and rows == ALL_ROWS:
        return lambda obs: obs
    return lambda obs: map_obs(lambda a: a[rows], obs)
