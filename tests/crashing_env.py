"""A test env that raises after a few steps (importable as a user module: modules=crashing_env)."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

from srl.api import Environment, EnvStep, register_env


@register_env("crashing")
class CrashingEnv(Environment):
    agents = ("agent",)

    def __init__(self, crash_after_steps: int = 50, hang: bool = False) -> None:
        self.crash_after_steps = crash_after_steps
        self.hang = hang  # block forever instead of raising, like a simulator that stopped answering
        self.steps = 0
        self.observation_spaces = {"agent": gym.spaces.Box(-1, 1, (3,), np.float32)}
        self.action_spaces = {"agent": gym.spaces.Discrete(2)}

    def reset(self, seed=None):
        return {"agent": np.zeros(3, np.float32)}

    def step(self, actions):
        self.steps += 1
        if self.steps > self.crash_after_steps:
            while self.hang:
                time.sleep(1)
            raise RuntimeError("boom: the environment crashed on purpose")
        return EnvStep({"agent": np.zeros(3, np.float32)}, {"agent": 0.0}, {"agent": False}, {"agent": False}, {})
