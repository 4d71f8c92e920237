"""Q-network MLP for Discrete actions (DQN, Ape-X), over any observation: a Box is read flat, as
it is; a Dict, Tuple or Discrete observation through multi-input's encoders (a CNN for an image
key, one-hot for a discrete one: srl.models.multi_input.ObservationEncoder), then the same MLP.

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
from srl.models.multi_input import ObservationEncoder, needs_encoder


@register_policy("q-mlp")
class QMLP(Policy):
    kind = "q-network"
    action_spaces = (gym.spaces.Discrete,)
    composite_observations = True
    encoder: ObservationEncoder | None

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (128, 128),
        encoders: dict[str, str] | None = None,
        cnn_features: int = 128,
        mlp_features: int = 64,
    ) -> None:
        """`encoders`, `cnn_features`, `mlp_features`: multi-input's, for a Dict, Tuple or Discrete
        observation (a Box is read flat, with no encoder: the checkpoints of Box runs are unchanged)."""
        super().__init__(observation_space, action_space)
        self.encoder = None
        if needs_encoder(observation_space):
            self.encoder = ObservationEncoder(observation_space, encoders, cnn_features, mlp_features)
        elif encoders:
            raise ValueError(f"encoders: a {type(observation_space).__name__} observation has no keys to encode")
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"q-mlp needs a Discrete action space, got {type(action_space).__name__}")
        hidden_sizes = tuple(int(h) for h in hidden_sizes)
        if not hidden_sizes or any(h <= 0 for h in hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive, got {hidden_sizes}")
        self.obs_dim = self.encoder.features if self.encoder is not None else int(np.prod(observation_space.shape or ()))
        self.action_start = int(action_space.start)
        self.net = mlp(self.input_dim(), hidden_sizes, int(action_space.n))

    def input_dim(self) -> int:
        """The width of what the network reads of a row (`inputs`)."""
        return self.obs_dim

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, ...] (or leaf path -> [B, ...]) -> what the network reads [B, input_dim], float32."""
        if self.encoder is not None:
            return self.encoder(obs)
        x = obs.reshape(obs.shape[0], self.obs_dim)
        return x if x.dtype == torch.float32 else x.float()

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}  # the replay targets need nothing from the acting policy

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, ...] (or leaf path -> [B, ...]) -> Q [B, num_actions]."""
        return self.net(self.inputs(obs))

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        action = self.q_values(obs).argmax(dim=-1)
        return {"action": action + self.action_start if self.action_start else action}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"q": Q(obs, action) [B]}, differentiable."""
        index = action.reshape(-1).long() - self.action_start
        return {"q": self.q_values(obs).gather(1, index.unsqueeze(1)).squeeze(1)}
