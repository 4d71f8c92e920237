"""Q-network MLP for flat (Box) observations and Discrete actions (DQN, Ape-X).

`rollout` acts greedily (argmax Q); exploration is added where actions are chosen, per env
(srl.algos.exploration), so the same network serves every epsilon. `q_values` is the training
view, with grad.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.models.mlp import mlp


@register_policy("q-mlp")
class QMLP(Policy):
    kind = "q-network"
    action_spaces = (gym.spaces.Discrete,)

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (128, 128),
    ) -> None:
        super().__init__(observation_space, action_space)
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(f"q-mlp needs a Box observation space, got {type(observation_space).__name__}")
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"q-mlp needs a Discrete action space, got {type(action_space).__name__}")
        hidden_sizes = tuple(int(h) for h in hidden_sizes)
        if not hidden_sizes or any(h <= 0 for h in hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive, got {hidden_sizes}")
        self.obs_dim = int(np.prod(observation_space.shape))
        self.action_start = int(action_space.start)
        self.net = mlp(self.input_dim(), hidden_sizes, int(action_space.n))

    def input_dim(self) -> int:
        """The width of what the network reads of a row (`inputs`)."""
        return self.obs_dim

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, ...] -> what the network reads [B, input_dim], float32."""
        x = obs.reshape(obs.shape[0], self.obs_dim)
        return x if x.dtype == torch.float32 else x.float()

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}  # the replay targets need nothing from the acting policy

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, ...] -> Q [B, num_actions]."""
        return self.net(self.inputs(obs))

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        action = self.q_values(obs).argmax(dim=-1)
        return {"action": action + self.action_start if self.action_start else action}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"q": Q(obs, action) [B]}, differentiable."""
        index = action.reshape(-1).long() - self.action_start
        return {"q": self.q_values(obs).gather(1, index.unsqueeze(1)).squeeze(1)}
