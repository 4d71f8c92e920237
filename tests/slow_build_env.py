"""A Gymnasium env slow to build (its constructor sleeps BUILD_S), cheap to step: what Crafter is to
`srl bench sampling` (about a second to build each). `slow_build_env:SlowBuild-v0` imports and
registers it (tests/test_bench.py)."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

BUILD_S = 1.5


class SlowBuildEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, build_s: float = BUILD_S) -> None:
        time.sleep(build_s)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self._t += 1
        return np.full(4, 0.5, np.float32), 1.0, False, self._t >= 50, {}


if "SlowBuild-v0" not in gym.envs.registry:
    gym.register("SlowBuild-v0", entry_point=SlowBuildEnv)
