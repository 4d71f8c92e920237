"""An env whose step sleeps (default 5 ms) and does nothing else: it stands for a simulator that
takes its time without using the CPU, so sampling throughput measures how well srl overlaps
many such envs across actor workers. Import it as a user module: modules=sleep_env."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

from srl.api import Environment, EnvStep, register_env


@register_env("sleep")
class SleepEnv(Environment):
    agents = ("agent",)

    def __init__(self, step_s: float = 0.005, episode_length: int = 200) -> None:
        self.step_s, self.episode_length, self.t = step_s, episode_length, 0
        self.observation_spaces = {"agent": gym.spaces.Box(-1, 1, (4,), np.float32)}
        self.action_spaces = {"agent": gym.spaces.Discrete(2)}

    def reset(self, seed=None):
        self.t = 0
        return {"agent": np.zeros(4, np.float32)}

    def step(self, actions):
        time.sleep(self.step_s)
        self.t += 1
        done = self.t >= self.episode_length
        obs = {"agent": np.zeros(4, np.float32)}
        return EnvStep(obs, {"agent": 1.0}, {"agent": done}, {"agent": False}, {})
