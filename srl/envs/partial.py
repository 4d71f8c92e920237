"""Partially observable classic control: CartPole without its velocities.

`CartPoleNoVel-v1` is CartPole-v1 observed through cart position and pole angle only, so the
velocities must be inferred from consecutive observations: a memoryless policy balances the pole
poorly, a recurrent one (or a stack of frames) well. Registered as a Gymnasium id, so it builds,
renders and vectorizes like CartPole-v1 itself.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

KEPT = (0, 2)  # cart position, pole angle; 1 and 3 are their velocities


class MaskVelocity(gym.ObservationWrapper):
    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        assert isinstance(box, gym.spaces.Box)
        self.observation_space = gym.spaces.Box(box.low[list(KEPT)], box.high[list(KEPT)], dtype=box.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[list(KEPT)]


def make_cartpole_no_velocity(**kwargs: Any) -> gym.Env:
    return MaskVelocity(gym.make("CartPole-v1", **kwargs))


if "CartPoleNoVel-v1" not in gym.envs.registry:
    gym.register("CartPoleNoVel-v1", entry_point=make_cartpole_no_velocity)
