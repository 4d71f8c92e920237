"""`BatchedPendulum`: Gymnasium's Pendulum-v1 as one batched torch program.

The dynamics are Gymnasium's `PendulumEnv` (g = 10, m = 1, l = 1, dt = 0.05):

    u         = clip(action, -2, 2)
    reward    = -(normalize(theta)^2 + 0.1 * theta_dot^2 + 0.001 * u^2)
    theta_dot = clip(theta_dot + (3 g / (2 l) * sin(theta) + 3 / (m l^2) * u) * dt, -8, 8)
    theta     = theta + theta_dot * dt

where normalize maps an angle to [-pi, pi). Never terminates; truncated after 200 steps
(Pendulum-v1's TimeLimit). Initial state: theta uniform in [-pi, pi), theta_dot in [-1, 1).
Observation (cos theta, sin theta, theta_dot) float32; actions Box(-2, 2, (1,)) float32,
clipped here (the policy may send any real number).

One deliberate difference in representation, not in dynamics: the stored angle is wrapped to
[-pi, pi) at the start of every step. Observation, reward and the next step depend on the angle only
through sin, cos and normalize, all 2 pi-periodic, so the trajectory is the same; but a float32
angle that grew without bound (a spinning pendulum reaches hundreds of radians) would lose
precision, 1e-5 rad at |theta| ~ 100.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl.envs.batched.base import BatchedTorchEnv

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
G = 10.0
M = 1.0
L = 1.0
TWO_PI = 2.0 * math.pi


class BatchedPendulum(BatchedTorchEnv):
    """`num_envs` Pendulum-v1 environments; `theta` and `theta_dot` are [num_envs] state tensors
    (views of `state` [num_envs, 2]) that may be written directly, like `elapsed`."""

    agents = ("agent",)
    default_max_episode_steps = 200
    _high = np.array([1.0, 1.0, MAX_SPEED], dtype=np.float32)
    observation_space = gym.spaces.Box(-_high, _high, dtype=np.float32)
    action_space = gym.spaces.Box(-MAX_TORQUE, MAX_TORQUE, shape=(1,), dtype=np.float32)

    def __init__(self, num_envs: int, *args: Any, g: float = G, **kwargs: Any) -> None:
        self.g = float(g)
        super().__init__(num_envs, *args, **kwargs)

    def _build_state(self) -> None:
        n, kw = self.num_envs, self.tensor_kw
        self.state = torch.zeros(n, 2, **kw)
        self.theta, self.theta_dot = self.state[:, 0], self.state[:, 1]
        self._u = torch.zeros(n, **kw)
        self._cost = torch.zeros(n, **kw)
        self._tmp = torch.zeros(n, **kw)
        self._high0 = torch.tensor([math.pi, 1.0], **kw)

    def _state_tensors(self) -> list[torch.Tensor]:
        return [self.state]

    def _sample_initial(self, n: int) -> list[torch.Tensor]:
        return [self._uniform((n, 2), -self._high0, self._high0)]

    def _prepare_actions(self, actions: Any) -> torch.Tensor:
        actions = torch.as_tensor(actions, device=self.device)
        if actions.numel() != self.num_envs:
            raise ValueError(f"expected {self.num_envs} Pendulum actions, got shape {tuple(actions.shape)}")
        return actions.reshape(self.num_envs)

    def _advance(self, actions: torch.Tensor) -> None:
        th, thdot, u, cost, tmp = self.theta, self.theta_dot, self._u, self._cost, self._tmp
        _wrap_(th)  # normalize(th), kept as the state: same sin, cos and cost
        u.copy_(actions).clamp_(-MAX_TORQUE, MAX_TORQUE)
        # cost = normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2
        torch.mul(th, th, out=cost)
        cost.addcmul_(thdot, thdot, value=0.1).addcmul_(u, u, value=0.001)
        self._env_reward.copy_(cost).neg_()
        # thdot += (3 g / (2 l) sin(th) + 3 / (m l^2) u) dt, clipped; th += thdot dt
        torch.sin(th, out=tmp)
        tmp.mul_(3.0 * self.g / (2.0 * L)).add_(u, alpha=3.0 / (M * L**2))
        thdot.add_(tmp, alpha=DT).clamp_(-MAX_SPEED, MAX_SPEED)
        th.add_(thdot, alpha=DT)
        # never terminates: self._env_terminated stays all False

    def _observe(self) -> torch.Tensor:
        obs = self._obs
        torch.cos(self.theta, out=obs[:, 0])
        torch.sin(self.theta, out=obs[:, 1])
        obs[:, 2].copy_(self.theta_dot)
        return obs


def _wrap_(angle: torch.Tensor) -> torch.Tensor:
    """angle -> ((angle + pi) mod 2 pi) - pi, in place: Gymnasium's angle_normalize."""
    return angle.add_(math.pi).remainder_(TWO_PI).sub_(math.pi)
