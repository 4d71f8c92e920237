"""`CountingVectorEnv`: CountingEnv as a natively batched Gymnasium vector env (next-step autoreset).

Registered as the Gymnasium id "srl/CountingVector-v0" with only a vector entry point, so
`env=srl/CountingVector-v0 env_backend=vector` runs the counting conformance checks
(`srl.testing.counting.check_counts`) through `srl.envs.native`: a transition lost or duplicated by
the next-step to same-step conversion is an arithmetic failure there.

Observations per env: float32 [env_id, episode_index, step_in_episode, 0], as CountingEnv's
single agent. env i gets env_id = seed + i at `reset(seed)` (srl's actors give every ring group
its own seed range, so ids are unique across a run). Every real step gives reward 1; an
episode ends at step `episode_length`, terminated (or truncated when `truncate=True`).

Like Gymnasium's own vector envs it auto-resets *next-step*: the step after an episode's end
ignores that env's action and returns the next episode's first observation with reward 0 and
no flags. `reset(options={"reset_mask": mask})` resets just the masked envs (Gymnasium's
partial-reset convention).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from srl.testing.counting import OBS_SIZE

ID = "srl/CountingVector-v0"


class CountingVectorEnv(gym.vector.VectorEnv):
    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, episode_length: int = 5, truncate: bool = False) -> None:
        if episode_length < 1:
            raise ValueError(f"CountingVectorEnv needs episode_length >= 1, got {episode_length}")
        self.num_envs = num_envs
        self.episode_length = episode_length
        self.truncate = truncate
        self.single_observation_space = gym.spaces.Box(0.0, np.inf, (OBS_SIZE,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.env_id = np.arange(num_envs)
        self.episode = np.full(num_envs, -1)
        self.step_in_episode = np.zeros(num_envs, np.int64)
        self.prev_done = np.zeros(num_envs, bool)

    def _obs(self) -> np.ndarray:
        zeros = np.zeros(self.num_envs)
        return np.stack([self.env_id, self.episode, self.step_in_episode, zeros], axis=1).astype(np.float32)

    def _start(self, mask: np.ndarray) -> None:
        self.episode[mask] += 1
        self.step_in_episode[mask] = 0
        self.prev_done[mask] = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        mask = (options or {}).get("reset_mask")
        if mask is None:
            if seed is not None:
                self.env_id = seed + np.arange(self.num_envs)
            mask = np.ones(self.num_envs, bool)
        self._start(np.asarray(mask, bool))
        return self._obs(), {}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        if np.shape(actions) != (self.num_envs,):
            raise ValueError(f"CountingVectorEnv: actions shaped {np.shape(actions)}, expected ({self.num_envs},)")
        restart = self.prev_done.copy()  # next-step autoreset: these envs only start a new episode
        self.step_in_episode[~restart] += 1
        ended = ~restart & (self.step_in_episode >= self.episode_length)
        self._start(restart)
        self.prev_done = ended
        reward = np.where(restart, 0.0, 1.0).astype(np.float32)
        no_flags = np.zeros(self.num_envs, bool)
        terminated, truncated = (no_flags, ended) if self.truncate else (ended, no_flags)
        return self._obs(), reward, terminated, truncated, {}


if ID not in gym.envs.registry:
    gym.register(ID, vector_entry_point=f"{__name__}:CountingVectorEnv")
