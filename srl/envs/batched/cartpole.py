"""`BatchedCartPole`: Gymnasium's CartPole-v1 as one batched torch program.

The dynamics are Gymnasium's `CartPoleEnv` (Barto, Sutton & Anderson's cart-pole with the
corrected equations of Florian 2007), euler integration, tau = 0.02 s:

    force    = +10 if action == 1 else -10
    temp     = (force + m_pole * l * theta_dot^2 * sin(theta)) / (m_cart + m_pole)
    theta_acc = (g * sin(theta) - cos(theta) * temp)
                / (l * (4/3 - m_pole * cos(theta)^2 / (m_cart + m_pole)))
    x_acc    = temp - m_pole * l * theta_acc * cos(theta) / (m_cart + m_pole)
    x += tau * x_dot; x_dot += tau * x_acc; theta += tau * theta_dot; theta_dot += tau * theta_acc

with g = 9.8, m_cart = 1.0, m_pole = 0.1, l = 0.5 (half the pole length). The episode
terminates when |x| > 2.4 or |theta| > 12 degrees (reward 1.0 on every step, the terminating
one included) and is truncated after 500 steps (CartPole-v1's TimeLimit). Initial states are
uniform in [-0.05, 0.05)^4. Observation: the state (x, x_dot, theta, theta_dot) as float32;
actions Discrete(2).

Gymnasium keeps the state in float64; `dtype=torch.float64` does too and matches it to
rounding, while the default float32 is faster and drifts from a float64 trajectory the way the
(unstable) pole amplifies rounding error (see tests/test_batched_envs.py).
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl.envs.batched.base import BatchedTorchEnv

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASS_POLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02
THETA_THRESHOLD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4


class BatchedCartPole(BatchedTorchEnv):
    """`num_envs` CartPole-v1 environments; state [num_envs, 4] = (x, x_dot, theta, theta_dot).

    `state` and `elapsed` (steps into the episode, int32) may be written directly, e.g. to put
    an env into a given state (tests sync it with a Gymnasium env that way).
    """

    agents = ("agent",)
    default_max_episode_steps = 500
    _high = np.array([X_THRESHOLD * 2, np.inf, THETA_THRESHOLD * 2, np.inf], dtype=np.float32)
    observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def _build_state(self) -> None:
        n, kw = self.num_envs, self.tensor_kw
        self.state = torch.zeros(n, 4, **kw)
        # scratch, reused every step (no allocation in the hot loop)
        self._force = torch.zeros(n, **kw)  # force / total_mass
        self._cos = torch.zeros(n, **kw)
        self._sin = torch.zeros(n, **kw)
        self._temp = torch.zeros(n, **kw)
        self._den = torch.zeros(n, **kw)
        self._acc = torch.zeros(n, 2, **kw)  # (x_acc, theta_acc)
        self._magnitude = torch.zeros(2, n, **kw)  # (|x|, |theta|), env axis innermost
        self._beyond = torch.zeros(2, n, dtype=torch.bool, device=self.device)
        # Constants as tensors: a Python float operand costs a conversion per op.
        self._limits = torch.tensor([[X_THRESHOLD], [THETA_THRESHOLD]], **kw)
        # action -> force / total_mass
        self._force_table = torch.tensor([-FORCE_MAG / TOTAL_MASS, FORCE_MAG / TOTAL_MASS], **kw)
        self._four_thirds_length = torch.tensor(4.0 / 3.0 * LENGTH, **kw)
        self._gravity = torch.tensor(GRAVITY, **kw)

    def _state_tensors(self) -> list[torch.Tensor]:
        return [self.state]

    def _sample_initial(self, n: int) -> list[torch.Tensor]:
        return [self._uniform((n, 4), -0.05, 0.05)]

    def _prepare_actions(self, actions: Any) -> torch.Tensor:
        actions = torch.as_tensor(actions, device=self.device)
        if actions.numel() != self.num_envs:
            raise ValueError(f"expected {self.num_envs} CartPole actions, got shape {tuple(actions.shape)}")
        return actions.reshape(self.num_envs).long()  # a no-op for int64 actions

    def _advance(self, actions: torch.Tensor) -> None:
        s = self.state
        theta, theta_dot = s[:, 2], s[:, 3]
        force, cos, sin, temp, den, acc = self._force, self._cos, self._sin, self._temp, self._den, self._acc
        x_acc, theta_acc = acc[:, 0], acc[:, 1]

        # force / total_mass: a table lookup, which also rejects actions other than 0 and 1
        torch.index_select(self._force_table, 0, actions, out=force)
        torch.cos(theta, out=cos)
        torch.sin(theta, out=sin)
        # temp = (force + polemass_length * theta_dot^2 * sin) / total_mass
        torch.mul(theta_dot, theta_dot, out=temp)
        temp.mul_(sin)
        torch.add(force, temp, alpha=POLEMASS_LENGTH / TOTAL_MASS, out=temp)
        # theta_acc = (g * sin - cos * temp) / (l * (4/3 - m_pole * cos^2 / total_mass))
        torch.addcmul(self._four_thirds_length, cos, cos, value=-LENGTH * MASS_POLE / TOTAL_MASS, out=den)
        torch.mul(sin, self._gravity, out=theta_acc)
        theta_acc.addcmul_(cos, temp, value=-1.0).div_(den)
        # x_acc = temp - polemass_length * theta_acc * cos / total_mass
        torch.addcmul(temp, theta_acc, cos, value=-POLEMASS_LENGTH / TOTAL_MASS, out=x_acc)
        # euler: positions from the old velocities, then the velocities
        s[:, 0::2].add_(s[:, 1::2], alpha=TAU)
        s[:, 1::2].add_(acc, alpha=TAU)

        # terminated = |x| > x_threshold or |theta| > theta_threshold
        # (with the env axis innermost: broadcasting over a last axis of 2 is slow)
        torch.abs(s[:, 0::2].t(), out=self._magnitude)
        torch.gt(self._magnitude, self._limits, out=self._beyond)
        torch.logical_or(self._beyond[0], self._beyond[1], out=self._env_terminated)
        self._env_reward.fill_(1.0)  # every step, the terminating one included

    def _observe(self) -> torch.Tensor:
        return self._obs.copy_(self.state)
