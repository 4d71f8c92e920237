"""Gymnasium envs that cannot give `srl eval --video` its frames, each in its own way
(importable as a user module: modules=render_envs)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class NoRenderMode(gym.Env):
    """Five steps of zeros; no render_modes in its metadata, no render_mode argument."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.t = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(4, np.float32), 1.0, self.t >= 5, False, {}


class TakesRenderMode(NoRenderMode):
    """Takes render_mode but lists no render mode (Gymnasium's checker asserts on it)."""

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__()
        self.render_mode = render_mode


class ListsRgbArrayDrawsNothing(TakesRenderMode):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def render(self):
        return None


def no_metadata() -> gym.Env:
    """A factory entry point: Gymnasium finds no metadata to check, and the call gets render_mode."""
    return NoRenderMode()


gym.register("srl-test/NoRenderMode-v0", entry_point=NoRenderMode)
gym.register("srl-test/TakesRenderMode-v0", entry_point=TakesRenderMode)
gym.register("srl-test/DrawsNothing-v0", entry_point=ListsRgbArrayDrawsNothing)
gym.register("srl-test/Factory-v0", entry_point=no_metadata)
