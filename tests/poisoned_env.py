"""Test env and algorithm that put a NaN or an infinity where srl must catch it (importable as a
user module: modules=poisoned_env).

"poisoned": episodes of `episode_length` steps, reward 1 per step, small finite observations;
env `poison_env_id` returns `value` as its observation or reward (`field`) on its step
`at_step` (counted from its construction), once, or with `poison_every` = k on every k-th step
from there on (1: every step); with `poison_resets` its every reset after that observes `value` too.

"nan-ppo": PPO whose loss is multiplied by NaN on the updates listed in `nan_updates` (0-based),
as a numerical blow-up would make it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from srl.algos.ppo import PPO, PPOConfig
from srl.api import Environment, EnvStep, register_algorithm, register_env


@register_env("poisoned")
class PoisonedEnv(Environment):
    agents = ("agent",)

    def __init__(self, env_id: int, poison_env_id: int = 0, at_step: int = 20, field: str = "obs",
                 value: float = float("nan"), episode_length: int = 8, poison_resets: bool = False,
                 poison_every: int = 0) -> None:
        self.poisoned = env_id == poison_env_id
        self.at_step, self.field, self.value, self.every = at_step, field, float(value), poison_every
        self.episode_length, self.poison_resets = episode_length, poison_resets
        self.steps = self.t = 0
        self.observation_spaces = {"agent": gym.spaces.Box(-10, 10, (3,), np.float32)}
        self.action_spaces = {"agent": gym.spaces.Discrete(2)}

    def _obs(self, bad: bool = False) -> dict[str, np.ndarray]:
        obs = np.full(3, self.t / self.episode_length, np.float32)
        if bad:
            obs[1] = self.value
        return {"agent": obs}

    def reset(self, seed=None):
        self.t = 0
        return self._obs(self.poisoned and self.poison_resets and self.steps >= self.at_step)

    def step(self, actions):
        self.steps += 1
        self.t += 1
        since = self.steps - self.at_step
        now = self.poisoned and (since == 0 or (self.every > 0 and since > 0 and since % self.every == 0))
        reward = self.value if now and self.field == "reward" else 1.0
        done = self.t >= self.episode_length
        return EnvStep(self._obs(now and self.field == "obs"), {"agent": reward}, {"agent": done},
                       {"agent": False}, {})


class NanPPOConfig(PPOConfig):
    nan_updates: list[int] = []


class NanPPO(PPO):
    def __init__(self, policy, config, total_env_steps):
        super().__init__(policy, config, total_env_steps)
        self.calls = 0
        self.poison = False

    def step(self, batch, env_steps):
        self.poison = self.calls in self.config.nan_updates
        self.calls += 1
        return super().step(batch, env_steps)

    def _optimize(self, loss):
        super()._optimize(loss * float("nan") if self.poison else loss)


register_algorithm("nan-ppo", NanPPO, NanPPOConfig)
