"""Environment contracts.

Users implement `Environment`: one instance, a fixed tuple of agents, each agent with its own
observation and action space, stepped with a dict of actions. Gymnasium single-agent envs and
PettingZoo parallel envs are adapted to it by `srl.envs` with no user code.

Actor workers do not step `Environment`s one by one: they step `VectorEnv`s, a batch of
environments whose agents are laid out as *rows* (env-major: row = env_index * num_agents +
agent_index). `srl.envs.vector.SerialVectorEnv` turns a list of `Environment`s into one;
natively batched environments (Gymnasium vector envs, EnvPool, on-device envs) implement
`VectorEnv` directly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from srl.monitor.info import EndedInfo


@dataclass
class EnvStep:
    """What one `Environment.step` returns, every field keyed by agent id."""

    obs: dict[str, Any]
    reward: dict[str, float]
    terminated: dict[str, bool]  # the episode ended for this agent (no bootstrap)
    truncated: dict[str, bool]  # cut off by a time limit (bootstrap from the value)
    info: dict[str, Any]


class Environment(ABC):
    """One environment instance with a fixed set of agents.

    The episode is over when every agent is terminated or truncated; the actor then calls
    `reset`. All agents act on every step (parallel stepping).
    """

    agents: tuple[str, ...]
    observation_spaces: Mapping[str, gym.Space]
    action_spaces: Mapping[str, gym.Space]

    @abstractmethod
    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start a new episode; return each agent's first observation."""

    @abstractmethod
    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        """Apply one action per agent."""

    def close(self) -> None:
        """Release resources (windows, simulators, sockets)."""


@dataclass
class VectorStep:
    """One batched step: arrays over rows, owned by the env (copy to keep)."""

    # [rows, *obs_shape], or for a Dict/Tuple space a dict leaf path -> [rows, ...] (srl.spaces);
    # for rows whose episode just ended: the next episode's first obs
    obs: np.ndarray | dict[str, np.ndarray]
    reward: np.ndarray  # [rows] float32
    terminated: np.ndarray  # [rows] bool
    truncated: np.ndarray  # [rows] bool


class VectorEnv(ABC):
    """`num_envs` environments x `agents`, stepped as one batch with automatic reset.

    When an environment's episode ends on a step, that step reports the final reward and
    done flags and already returns the first observation of the next episode (same-step
    auto-reset), so the actor never pauses a row.
    """

    num_envs: int
    agents: tuple[str, ...]
    observation_space: gym.Space  # one agent's space; every agent of a VectorEnv shares it
    action_space: gym.Space

    # monitor.info_keys (srl.monitor.info): where an env that reports info writes the watched keys'
    # values at the steps that end episodes; None: it reports none (the natively batched backends)
    ended_info: EndedInfo | None = None

    @property
    def num_rows(self) -> int:
        return self.num_envs * len(self.agents)

    def watch_info(self, keys: tuple[str, ...]) -> None:
        """Write these info keys' values at episodes' ends into `ended_info`, if this env can (an
        env that reports info sets it; by default none is reported)."""

    @abstractmethod
    def reset(self, seed: int) -> np.ndarray | dict[str, np.ndarray]:
        """Reset every environment (env i seeded with seed + i); return obs [rows, ...] (as `VectorStep`'s)."""

    @abstractmethod
    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every environment with actions [rows, ...]."""

    def agent_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        """Each agent's own (observation, action) space as srl's arrays hold it. Where agents'
        observation Boxes differ in length, `observation_space` is the longest, their rows zero-padded
        to it, and a run maps them to policies of their own (config `policies`, srl.graph.lanes)."""
        return {agent: (self.observation_space, self.action_space) for agent in self.agents}

    def reset_env(self, index: int) -> np.ndarray | dict[str, np.ndarray]:
        """Start a new episode in env `index` alone (no seed: its random stream goes on) and
        return its rows' first observations [agents, ...]. Optional: an actor calls it only to
        restart an env that returned a NaN or an infinity (nonfinite_env=skip_episode)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release every environment."""
