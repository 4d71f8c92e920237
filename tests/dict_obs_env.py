"""A Dict-observation env for tests (importable: modules=dict_obs_env): an image key and a vector key,
both needed to play well.

Each step the 8x8x3 uint8 image lights one quadrant (channel 0, 255 on a dim noisy background),
and the vector holds a flip sign (+1 or -1) and a noise value. The right action is the lit
quadrant's index (0..3), or 3 - index when the sign is -1. Reward 1 for the right action, 0
otherwise; episodes last `episode_steps` steps (a time limit). Per step: random play earns 1/4,
reading only the image 1/2 (it cannot tell the sign), reading both 1.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from srl.api.registry import register_env
from srl.envs import GymEnvironment

SIZE = 8


class ImageCue(gym.Env):
    observation_space = gym.spaces.Dict({
        "image": gym.spaces.Box(0, 255, (SIZE, SIZE, 3), np.uint8),
        "vector": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    })
    action_space = gym.spaces.Discrete(4)

    def __init__(self, episode_steps: int = 10) -> None:
        self.episode_steps = episode_steps

    def _draw(self) -> dict:
        rng = self.np_random
        self.quadrant, self.flip = int(rng.integers(4)), bool(rng.integers(2))
        image = rng.integers(0, 40, (SIZE, SIZE, 3), dtype=np.uint8)
        half = SIZE // 2
        row, col = divmod(self.quadrant, 2)
        image[row * half : (row + 1) * half, col * half : (col + 1) * half, 0] = 255
        vector = np.array([-1.0 if self.flip else 1.0, rng.uniform(-1, 1)], np.float32)
        return {"image": image, "vector": vector}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        right = 3 - self.quadrant if self.flip else self.quadrant
        reward = float(int(action) == right)
        self.t += 1
        return self._draw(), reward, False, self.t >= self.episode_steps, {}


@register_env("image-cue")
def make_image_cue(episode_steps: int = 10) -> GymEnvironment:
    return GymEnvironment(ImageCue(episode_steps))


gym.register("srl-tests/ImageCue-v0", entry_point=ImageCue)
