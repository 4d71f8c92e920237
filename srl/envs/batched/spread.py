"""`BatchedSpread`: a cooperative multi-agent particle task, batched in torch.

In the spirit of the "simple spread" particle world (Lowe et al., 2017), written from its
description and simplified (no collisions, no communication). Each env holds `num_agents`
agents and `num_landmarks` landmarks (default: as many as agents) on a plane; the agents must
cover the landmarks together.

* State per env: agent positions [A, 2], agent velocities [A, 2], landmark positions [L, 2].
* Reset: agent and landmark positions uniform in [-1, 1)^2, velocities 0.
* Actions, one per agent, Discrete(5): 0 stay, 1 push -x, 2 push +x, 3 push -y, 4 push +y.
* Dynamics, with dt = 0.1, damping = 0.25 and acceleration 5.0 (unit mass)::

      velocity = (1 - damping) * velocity + acceleration * direction * dt
      position = position + velocity * dt

  Positions are not bounded (nothing is gained by leaving).
* Observation of agent a (float32, size 4 + 2 L + 2 (A - 1)): its velocity, its position, each
  landmark's position relative to it (landmark order), each other agent's position relative to
  it (agent order, itself left out).
* Reward (shared: every agent's row gets the same): minus the sum over landmarks of the
  distance from the landmark to its nearest agent; 0 when every landmark is covered, and about
  -1 per landmark for a random start.
* Episodes last 25 steps: truncated (bootstrap), never terminated.

Agents are named "agent_0" .. ; rows are env-major (row = env * A + agent) as everywhere in srl.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl.envs.batched.base import BatchedTorchEnv

DT = 0.1
DAMPING = 0.25
ACCELERATION = 5.0
# action -> unit push direction
DIRECTIONS = ((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0), (0.0, -1.0), (0.0, 1.0))


class BatchedSpread(BatchedTorchEnv):
    """`num_envs` cooperative navigation envs of `num_agents` agents; see the module doc.

    State tensors (writable): `agent_pos` [num_envs, A, 2], `agent_vel` [num_envs, A, 2],
    `landmark_pos` [num_envs, L, 2], and `elapsed`.
    """

    default_max_episode_steps = 25

    def __init__(
        self,
        num_envs: int,
        *args: Any,
        num_agents: int = 3,
        num_landmarks: int | None = None,
        **kwargs: Any,
    ) -> None:
        if num_agents < 1:
            raise ValueError(f"num_agents must be >= 1, got {num_agents}")
        num_landmarks = num_agents if num_landmarks is None else int(num_landmarks)
        if num_landmarks < 1:
            raise ValueError(f"num_landmarks must be >= 1, got {num_landmarks}")
        self.agents = tuple(f"agent_{j}" for j in range(num_agents))
        self.num_landmarks = num_landmarks
        self.obs_size = 4 + 2 * num_landmarks + 2 * (num_agents - 1)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(self.obs_size,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(len(DIRECTIONS))
        super().__init__(num_envs, *args, **kwargs)

    def _build_state(self) -> None:
        n, a, m = self.num_envs, self.num_agents, self.num_landmarks
        kw = self.tensor_kw
        self.agent_pos = torch.zeros(n, a, 2, **kw)
        self.agent_vel = torch.zeros(n, a, 2, **kw)
        self.landmark_pos = torch.zeros(n, m, 2, **kw)
        self._push = torch.tensor(DIRECTIONS, **kw) * (ACCELERATION * DT)  # action -> velocity change
        # others[i] = the agents other than i, in order
        self._others = torch.tensor(
            [[j for j in range(a) if j != i] for i in range(a)], dtype=torch.long, device=self.device
        ).reshape(a, max(a - 1, 0))

    def _state_tensors(self) -> list[torch.Tensor]:
        return [self.agent_pos, self.agent_vel, self.landmark_pos]

    def _sample_initial(self, n: int) -> list[torch.Tensor]:
        a, m = self.num_agents, self.num_landmarks
        pos = self._uniform((n, a, 2), -1.0, 1.0)
        landmarks = self._uniform((n, m, 2), -1.0, 1.0)
        return [pos, torch.zeros_like(pos), landmarks]

    def _prepare_actions(self, actions: Any) -> torch.Tensor:
        actions = torch.as_tensor(actions, device=self.device)
        if actions.numel() != self.num_rows:
            raise ValueError(
                f"expected {self.num_rows} Spread actions (one per row), got shape {tuple(actions.shape)}"
            )
        return actions.reshape(self.num_envs, self.num_agents).long()

    def _advance(self, actions: torch.Tensor) -> None:
        self.agent_vel.mul_(1.0 - DAMPING).add_(self._push[actions])
        self.agent_pos.add_(self.agent_vel, alpha=DT)
        self._env_reward.copy_(self.coverage_cost()).neg_()
        # never terminates: self._env_terminated stays all False

    def coverage_cost(self) -> torch.Tensor:
        """[num_envs]: sum over landmarks of the distance to the nearest agent (-reward)."""
        gaps = self.agent_pos.unsqueeze(2) - self.landmark_pos.unsqueeze(1)  # [n, A, L, 2]
        return torch.linalg.vector_norm(gaps, dim=-1).amin(dim=1).sum(dim=1)

    def _observe(self) -> torch.Tensor:
        n, a = self.num_envs, self.num_agents
        pos = self.agent_pos
        obs = self._obs.view(n, a, self.obs_size)
        obs[:, :, 0:2] = self.agent_vel
        obs[:, :, 2:4] = pos
        lm_end = 4 + 2 * self.num_landmarks
        rel_landmarks = self.landmark_pos.unsqueeze(1) - pos.unsqueeze(2)  # [n, A, L, 2]
        obs[:, :, 4:lm_end] = rel_landmarks.reshape(n, a, -1)
        if a > 1:
            rel_others = pos[:, self._others] - pos.unsqueeze(2)  # [n, A, A - 1, 2]
            obs[:, :, lm_end:] = rel_others.reshape(n, a, -1)
        return self._obs
