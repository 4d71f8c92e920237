"""A counting env that leaks memory on every step (importable: modules=leaky_env), to test
that the controller names a worker whose memory grows (worker_memory_limit_mib)."""

from __future__ import annotations

import numpy as np

from srl.api.registry import register_env
from srl.testing.counting import CountingEnv


class LeakyCountingEnv(CountingEnv):
    def __init__(self, env_id: int, episode_length: int, kib_per_step: int) -> None:
        super().__init__(env_id, episode_length)
        self.kept: list[np.ndarray] = []
        self.kib_per_step = kib_per_step

    def step(self, actions):
        self.kept.append(np.ones(self.kib_per_step * 1024, np.uint8))  # ones: the pages are touched
        return super().step(actions)


@register_env("leaky")
def leaky(env_id: int, episode_length: int = 5, kib_per_step: int = 0) -> CountingEnv:
    return LeakyCountingEnv(env_id, episode_length, kib_per_step)
