"""`CountingGymEnv`: CountingEnv's single agent as one plain Gymnasium env, for the loop backend.

Registered as the Gymnasium id "srl/Counting-v0", so `env=srl/Counting-v0 env_backend=loop` runs
the counting conformance checks (`srl.testing.counting.check_counts`) through `GymVectorEnv` and
the wrappers `gymnasium.make` adds (TimeLimit, OrderEnforcing, the env checker), which
`GymVectorEnv` steps past once they only pass calls through (srl.envs.gym_passthrough): a
transition lost or duplicated there, or a truncation counted wrongly, fails the arithmetic.

Observations: float32 [env_id, episode_index, step_in_episode, 0]; env_id is the seed of the
first seeded reset (GymVectorEnv gives env i seed + i, srl's actors give every ring group its
own seed range). Every step gives reward 1. The env terminates its episode at step
`episode_length` (never with `episode_length=0`: then only a TimeLimit, e.g. `gymnasium.make(
ID, max_episode_steps=L)`, ends it, truncated).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from srl.testing.counting import OBS_SIZE

ID = "srl/Counting-v0"


class CountingGymEnv(gym.Env):
    def __init__(self, episode_length: int = 5) -> None:
        if episode_length < 0:
            raise ValueError(f"CountingGymEnv needs episode_length >= 0, got {episode_length}")
        self.episode_length = episode_length
        self.observation_space = gym.spaces.Box(0.0, np.inf, (OBS_SIZE,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.env_id = 0
        self.episode = -1
        self.step_in_episode = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.env_id, self.episode, self.step_in_episode, 0], np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.env_id = seed
        self.episode += 1
        self.step_in_episode = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"CountingGymEnv: action {action!r} is not in {self.action_space}")
        self.step_in_episode += 1
        terminated = self.step_in_episode == self.episode_length
        return self._obs(), 1.0, terminated, False, {}


if ID not in gym.envs.registry:
    gym.register(ID, entry_point=f"{__name__}:CountingGymEnv")
