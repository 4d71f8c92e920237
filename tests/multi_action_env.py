"""Envs with MultiDiscrete and MultiBinary actions (importable as a user module: modules=multi_action_env).

`srl-test/MatchTargets-v0` (a Gymnasium id, so srl's GymVectorEnv steps it): each step shows
one number per action entry, uniform in [0, 1), and the target of entry d is
start[d] + floor(number[d] * nvec[d]); the reward is the fraction of entries that hit their
target. Episodes last `episode_steps` (10) steps, so a perfect policy scores 10 and uniform
random actions score 10 * mean(1 / nvec): 3.6 for nvec (3, 4, 2).

"match-bits" (an srl env, so SerialVectorEnv steps it): `bits` numbers in [-1, 1]; bit d should
be 1 where number d is positive; the reward is the fraction of bits right (random: 5, best: 10).

Both refuse an action that is not exactly what Gymnasium's space holds (shape, dtype, bounds),
so a learning run also proves that srl hands the env actions of the right dtype and shape.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from srl.api.registry import register_env
from srl.envs.gym_env import GymEnvironment

MATCH_TARGETS = "srl-test/MatchTargets-v0"


def _check(space: gym.Space, action) -> None:
    if not (isinstance(action, np.ndarray) and action.dtype == space.dtype and space.contains(action)):
        raise ValueError(f"action {action!r} ({getattr(action, 'dtype', type(action))}) is not in {space}")


class _Matching(gym.Env):
    """Episodes of `episode_steps` steps; each step's reward is the fraction of action entries
    equal to `target()`, the target of the numbers `_observe` drew."""

    episode_steps: int

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        _check(self.action_space, action)
        reward = float(np.mean(action == self.target()))
        self.t += 1
        return self._observe(), reward, False, self.t >= self.episode_steps, {}


class MatchTargets(_Matching):
    def __init__(self, nvec=(3, 4, 2), start=None, episode_steps: int = 10) -> None:
        self.nvec = np.asarray(nvec, np.int64)
        self.start = np.zeros_like(self.nvec) if start is None else np.asarray(start, np.int64)
        self.action_space = gym.spaces.MultiDiscrete(self.nvec, start=self.start)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (len(self.nvec),), np.float32)
        self.episode_steps = episode_steps

    def _observe(self) -> np.ndarray:
        self.numbers = self.np_random.random(len(self.nvec)).astype(np.float32)
        return self.numbers

    def target(self) -> np.ndarray:
        return self.start + np.minimum((self.numbers * self.nvec).astype(np.int64), self.nvec - 1)


class MatchBits(_Matching):
    def __init__(self, bits: int = 4, episode_steps: int = 10) -> None:
        self.action_space = gym.spaces.MultiBinary(bits)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (bits,), np.float32)
        self.bits, self.episode_steps = bits, episode_steps

    def _observe(self) -> np.ndarray:
        self.numbers = self.np_random.uniform(-1, 1, self.bits).astype(np.float32)
        return self.numbers

    def target(self) -> np.ndarray:
        return self.numbers > 0


if MATCH_TARGETS not in gym.envs.registry:
    gym.register(MATCH_TARGETS, entry_point=MatchTargets)


@register_env("match-bits")
def match_bits(bits: int = 4, episode_steps: int = 10) -> GymEnvironment:
    return GymEnvironment(MatchBits(bits, episode_steps))
