"""Each agent's row carries the global state, for centralized critics (MAPPO).

`CentralStateEnvironment` wraps a multi-agent `Environment`. Agent i's observation becomes

    [ own observation (own_dim) | one-hot of i (num_agents) | the global state (state_dim) ]

so a policy can act on its own part (decentralized execution) while its critic (MAPPO) or its
mixer (QMIX) reads the global state (centralized training). The global state is the env's own
when it offers one (`state()` and `state_space`, as PettingZoo's parallel envs may: MPE's is
every agent's observation), else the concatenation of all agents' own observations. Own
observations of agents with smaller spaces are zero-padded to the largest one, so every row
shares one Box.

The layout travels with the space: the observation space is an `AgentStateBox`, which remembers
the agent names, `own_dim`, `mask_dim` (the last `mask_dim` entries of an own observation are
an action mask, see srl.envs.pettingzoo_aec) and `state_dim`. `srl.models.mappo` and
`srl.models.agent_q` read it from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from srl.api.env import Environment, EnvStep


class AgentStateBox(gym.spaces.Box):
    """A float32 Box of [own | one-hot | global state] rows; see the module doc."""

    def __init__(self, agents: tuple[str, ...], own_dim: int, mask_dim: int = 0, state_dim: int | None = None,
                 team: int | None = None) -> None:
        self.agents = tuple(agents)
        self.own_dim = int(own_dim)
        self.mask_dim = int(mask_dim)
        self.state_dim = len(self.agents) * self.own_dim if state_dim is None else int(state_dim)
        # the agents whose rows one policy's team transition holds (QMIX mixes their Qs): every
        # agent of the env, or those a run maps to that policy (srl.graph.lanes); not part of a row's layout
        self.team = len(self.agents) if team is None else int(team)
        size = self.own_dim + len(self.agents) + self.state_dim
        super().__init__(low=-np.inf, high=np.inf, shape=(size,), dtype=np.float32)

    @property
    def layout(self) -> tuple[tuple[str, ...], int, int, int]:
        return self.agents, self.own_dim, self.mask_dim, self.state_dim

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentStateBox) and other.layout == self.layout

    def __hash__(self) -> int:
        return hash(self.layout)

    def __repr__(self) -> str:
        return (f"AgentStateBox(agents={self.agents}, own_dim={self.own_dim}, mask_dim={self.mask_dim}, "
                f"state_dim={self.state_dim})")

    def __reduce__(self) -> tuple[Any, ...]:  # pickled into worker processes by its layout and team only
        return (AgentStateBox, (*self.layout, self.team))

    def of_team(self, size: int) -> AgentStateBox:
        """The same rows, for a policy whose team is `size` of the agents."""
        return AgentStateBox(*self.layout, team=size)

    def split(self, rows: Any) -> tuple[Any, Any, Any]:
        """[B, D] rows (tensors or arrays) -> (own [B, own_dim], one-hot [B, agents], state [B, state_dim])."""
        n = len(self.agents)
        return rows[:, : self.own_dim], rows[:, self.own_dim : self.own_dim + n], rows[:, self.own_dim + n :]

    def action_mask(self, rows: Any) -> Any:
        """[B, D] rows (tensors or arrays) -> the legal-move masks [B, mask_dim] at the end of each own
        observation (1: legal; all 0: the row waits for its turn). The one place the mask is cut."""
        return rows[:, self.own_dim - self.mask_dim : self.own_dim]


def _flat_dim(space: gym.Space, agent: str) -> int:
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(f"CentralStateEnvironment needs Box observations, agent {agent!r} has {space}")
    return int(np.prod(space.shape))


class CentralStateEnvironment(Environment):
    """Adds the one-hot agent id and the global state to every agent's observation."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.agents = tuple(env.agents)
        dims = [_flat_dim(env.observation_spaces[a], a) for a in self.agents]
        self.own_dim = max(dims)
        mask_dim = int(getattr(env, "action_mask_dim", 0))
        env_state = getattr(env, "state_space", None)  # the env's own global state, if it offers one
        reader = getattr(env, "state", None)
        self.state_reader = reader if isinstance(env_state, gym.spaces.Box) and callable(reader) else None
        state_dim = int(np.prod(env_state.shape)) if self.state_reader and env_state is not None else None
        space = AgentStateBox(self.agents, self.own_dim, mask_dim, state_dim)
        if mask_dim and len(set(dims)) > 1:
            raise ValueError("action masks need every agent to have the same observation size")
        self.observation_spaces = {a: space for a in self.agents}
        self.action_spaces = dict(env.action_spaces)

    def _rows(self, obs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        n = len(self.agents)
        own = np.zeros((n, self.own_dim), np.float32)
        for i, agent in enumerate(self.agents):
            flat = np.asarray(obs[agent], np.float32).reshape(-1)
            own[i, : flat.size] = flat
        state = np.asarray(self.state_reader(), np.float32).reshape(-1) if self.state_reader else own.reshape(-1)
        eye = np.eye(n, dtype=np.float32)
        return {a: np.concatenate([own[i], eye[i], state]) for i, a in enumerate(self.agents)}

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        return self._rows(self.env.reset(seed=seed))

    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        out = self.env.step(actions)
        return EnvStep(self._rows(out.obs), out.reward, out.terminated, out.truncated, out.info)

    def close(self) -> None:
        self.env.close()
