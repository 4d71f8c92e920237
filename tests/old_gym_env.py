"""Envs written for the old `gym` API, registered with gym on import (modules=shimmy,old_gym_env):
what a package from before Gymnasium gives. Each is a corridor: action 1 steps right, 0 left;
reaching the end pays 1, every step costs 0.01, 50 steps at most (so always-right scores 0.96).

* OldCorridor21-v0: gym 0.21's API, reset() -> obs, step() -> (obs, reward, done, info)
  (through Shimmy's GymV21Environment-v0).
* OldCorridor26-v0: gym 0.26's, reset(seed=...) -> (obs, info), step() -> 5 values, gym's spaces
  (through Shimmy's GymV26Environment-v0).

Also registered with Gymnasium directly, as an old env handed straight to it would be (srl names
the Shimmy recipe): GymnasiumOldReset-v0 (reset without a seed) and GymnasiumOldStep-v0
(Gymnasium's reset, the old 4-value step)."""

from __future__ import annotations

from typing import Any

import gym
import gymnasium
import numpy as np

LENGTH = 5
MAX_STEPS = 50


class _Corridor:
    def _start(self) -> np.ndarray:
        self.position, self.steps = 0, 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([self.position / LENGTH, self.steps / MAX_STEPS], np.float32)

    def _move(self, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        self.position = max(0, self.position + (1 if int(action) == 1 else -1))
        self.steps += 1
        reached = self.position >= LENGTH
        return self._obs(), 1.0 if reached else -0.01, reached, self.steps >= MAX_STEPS


class Corridor21(_Corridor, gym.Env):
    metadata = {"render.modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def seed(self, seed: int | None = None) -> list[int | None]:
        return [seed]

    def reset(self) -> np.ndarray:  # type: ignore[override]
        return self._start()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, dict]:  # type: ignore[override]
        obs, reward, reached, out_of_time = self._move(action)
        return obs, reward, reached or out_of_time, {"TimeLimit.truncated": out_of_time and not reached}

    def render(self, mode: str = "human") -> None:  # type: ignore[override]
        return None


class Corridor26(_Corridor, gym.Env):
    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[override]
        super().reset(seed=seed)
        return self._start(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:  # type: ignore[override]
        obs, reward, reached, out_of_time = self._move(action)
        return obs, reward, reached, out_of_time and not reached, {}


class GymnasiumOldReset(_Corridor, gymnasium.Env):
    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)

    def reset(self) -> np.ndarray:  # type: ignore[override]
        return self._start()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, dict]:  # type: ignore[override]
        obs, reward, reached, out_of_time = self._move(action)
        return obs, reward, reached or out_of_time, {}


class GymnasiumOldStep(GymnasiumOldReset):
    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[override]
        return self._start(), {}


if "OldCorridor21-v0" not in gym.envs.registry:
    gym.register("OldCorridor21-v0", entry_point=Corridor21)  # no max_episode_steps: gym's TimeLimit wants 5 values
    gym.register("OldCorridor26-v0", entry_point=Corridor26)
if "GymnasiumOldReset-v0" not in gymnasium.envs.registry:
    gymnasium.register("GymnasiumOldReset-v0", entry_point=GymnasiumOldReset)
    gymnasium.register("GymnasiumOldStep-v0", entry_point=GymnasiumOldStep)
