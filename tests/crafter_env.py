"""Crafter as a Gymnasium env, registered on import (env="crafter_env:Crafter-v1").

crafter.Env speaks the old gym API (reset gives the observation alone, step four values) with
spaces of its own; this wrapper gives Gymnasium's: Box(0, 255, (64, 64, 3), uint8) frames, the
same 17 Discrete actions, `terminated` for the player's death and `truncated` at crafter's own
episode length (10,000 steps; `length=` shortens it).
"""

from __future__ import annotations

from typing import Any

import crafter
import gymnasium as gym
import numpy as np

ID = "Crafter-v1"


class CrafterEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, length: int = 10_000, size: int = 64) -> None:
        self.length = length
        self.size = size
        self._env: crafter.Env | None = None
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(len(crafter.constants.actions))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if self._env is None or seed is not None:  # crafter takes its seed when built
            self._env = crafter.Env(area=(64, 64), size=(self.size, self.size), length=self.length,
                                    seed=None if seed is None else int(seed))
        return self._env.reset(), {}

    def step(self, action):
        assert self._env is not None, "reset first"
        obs, reward, done, info = self._env.step(int(action))
        truncated = bool(done and info.get("discount", 1.0) == 1.0)  # time ran out, the player lives
        return obs, float(reward), bool(done and not truncated), truncated, {}


if ID not in gym.envs.registry:
    gym.register(ID, entry_point=CrafterEnv)
