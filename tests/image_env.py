"""A counting env with uint8 observations, as image envs give them (importable: modules=image_env).

`counting-uint8` observes [env_id, episode_index, step_in_episode, agent_index] as uint8, so
`check_counts` can still prove that every transition reached the trainer once, now through the
uint8 path (values must stay below 256: a few envs, short runs).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from srl.api.registry import register_env
from srl.testing.counting import OBS_SIZE, CountingEnv


class Uint8CountingEnv(CountingEnv):
    def __init__(self, env_id: int, episode_length: int = 5) -> None:
        super().__init__(env_id, episode_length)
        space = gym.spaces.Box(0, 255, (OBS_SIZE,), np.uint8)
        self.observation_spaces = {a: space for a in self.agents}

    def _obs(self):
        obs = super()._obs()
        if max(self.env_id, self.episode_index) > 255:
            raise OverflowError("counting-uint8 counts up to 255 envs and episodes")
        return {a: o.astype(np.uint8) for a, o in obs.items()}


@register_env("counting-uint8")
def counting_uint8(env_id: int, episode_length: int = 5) -> CountingEnv:
    return Uint8CountingEnv(env_id, episode_length)
