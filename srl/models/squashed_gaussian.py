"""Squashed Gaussian actor for Box actions (SAC): a = low + (tanh(u) + 1) / 2 * (high - low),
u ~ N(mean(obs), std(obs)^2).

`rollout` samples (or takes tanh(mean) when deterministic) for actors; `sample` is the
reparameterized training view with grad, with log-probabilities corrected for the tanh and the
rescaling, so entropy targets are in the environment's action units.

A Box observation is read flat, as it is; a Dict, Tuple or Discrete one (a goal env's
observation/achieved_goal/desired_goal) through multi-input's encoders
(srl.models.multi_input.ObservationEncoder), then the same MLP.

`normalize_obs=True` (a flat Box only) standardizes the observation by a running mean and variance
held as buffers, so they travel to the actors with the weights and are saved in checkpoints. The
learner updates them from the observations it trains on (`update_obs_stats`, SAC's step); with
hindsight relabelling those are the relabelled goals, as the HER paper's normalizer saw them. A goal
env's positions are small numbers around an offset (FetchReach's gripper near (1.3, 0.75, 0.5)),
and without it SAC + HER on FetchReach needed 2.2-2.8 times the env steps of SB3 with the zoo's
observation normalisation (docs/results.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.models.mlp import mlp
from srl.models.multi_input import ObservationEncoder, needs_encoder
from srl.spaces import num_rows

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@register_policy("squashed-gaussian-mlp")
class SquashedGaussianMLP(Policy):
    kind = "squashed-gaussian"
    action_spaces = (gym.spaces.Box,)
    composite_observations = True
    encoder: ObservationEncoder | None
    scale: torch.Tensor  # buffers (register_buffer): half the action range, and its middle
    center: torch.Tensor

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, hidden_sizes: Sequence[int] = (256, 256),
        encoders: dict[str, str] | None = None, cnn_features: int = 128, mlp_features: int = 64,
        normalize_obs: bool = False,
    ) -> None:
        """`encoders`, `cnn_features`, `mlp_features`: multi-input's, for a Dict, Tuple or Discrete
        observation (a Box is read flat, with no encoder: the checkpoints of Box runs are unchanged).
        `normalize_obs`: standardize a Box observation by running statistics (the module's docstring)."""
        super().__init__(observation_space, action_space)
        self.encoder = None
        if needs_encoder(observation_space):
            self.encoder = ObservationEncoder(observation_space, encoders, cnn_features, mlp_features)
        elif encoders:
            raise ValueError(f"encoders: a {type(observation_space).__name__} observation has no keys to encode")
        if not isinstance(action_space, gym.spaces.Box) or not np.isfinite([action_space.low, action_space.high]).all():
            raise TypeError(f"squashed-gaussian-mlp needs a bounded Box action space, got {action_space}")
        self.obs_dim = self.encoder.features if self.encoder is not None else int(np.prod(observation_space.shape or ()))
        self.action_shape = tuple(action_space.shape)
        self.act_dim = int(np.prod(self.action_shape))
        self.net = mlp(self.obs_dim, tuple(int(h) for h in hidden_sizes), 2 * self.act_dim)
        low = torch.as_tensor(action_space.low, dtype=torch.float32).reshape(-1)
        high = torch.as_tensor(action_space.high, dtype=torch.float32).reshape(-1)
        self.register_buffer("scale", (high - low) / 2)
        self.register_buffer("center", (high + low) / 2)
        self.normalizer = None
        if normalize_obs:
            if self.encoder is not None:
                raise ValueError("normalize_obs: standardizes a Box observation; a Dict, Tuple or Discrete one goes "
                                 "through encoders (flatten it with gymnasium.wrappers.FlattenObservation)")
            self.normalizer = ObsNormalizer(self.obs_dim)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """The observation as the networks read it: flat, standardized where normalize_obs is set
        (SAC's critics read it so too)."""
        if self.encoder is not None:
            return obs
        x = obs.reshape(obs.shape[0], self.obs_dim).float()
        return x if self.normalizer is None else self.normalizer(x)

    def update_obs_stats(self, obs: torch.Tensor) -> None:
        """Fold a batch of observations into the running statistics (no-op without normalize_obs)."""
        if self.normalizer is not None:
            self.normalizer.update(obs.reshape(obs.shape[0], self.obs_dim).float())

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}

    def _head(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.encoder(obs) if self.encoder is not None else self.normalize(obs)
        mean, log_std = self.net(x).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(action [B, act_dim] in env units, log_prob [B]), reparameterized (differentiable). `noise`:
        the unit Gaussian draws [B, act_dim] to act with (colored exploration noise); none: fresh ones."""
        mean, log_std = self._head(obs)
        noise = torch.randn_like(mean) if noise is None else noise.reshape(mean.shape)
        u = mean + noise * log_std.exp()
        squashed = torch.tanh(u)
        log_prob = (-0.5 * noise * noise - log_std - _HALF_LOG_2PI).sum(-1)
        # change of variables: da = scale * (1 - tanh(u)^2) du; 2(log2 - u - softplus(-2u)) = log(1 - tanh^2)
        log_det = 2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u)) + self.scale.log()
        return self.center + self.scale * squashed, log_prob - log_det.sum(-1)

    def rollout(self, obs: torch.Tensor, deterministic: bool = False,
                noise: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """`noise`: see `sample`."""
        if deterministic:
            action = self.center + self.scale * torch.tanh(self._head(obs)[0])
        else:
            action = self.sample(obs, noise)[0]
        return {"action": action.reshape(num_rows(obs), *self.action_shape)}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"log_prob": [B]} of given env-unit actions (strictly inside the bounds)."""
        mean, log_std = self._head(obs)
        y = ((action.reshape(mean.shape) - self.center) / self.scale).clamp(-1 + 1e-6, 1 - 1e-6)
        u = torch.atanh(y)
        z = (u - mean) * torch.exp(-log_std)
        log_prob = (-0.5 * z * z - log_std - _HALF_LOG_2PI).sum(-1)
        log_det = (torch.log1p(-y * y) + self.scale.log()).sum(-1)
        return {"log_prob": log_prob - log_det}


class ObsNormalizer(nn.Module):
    """Running mean and variance of flat observations (parallel-merge of batch moments, Chan et
    al.), and the standardization clipped to +-CLIP as SB3's VecNormalize does. Buffers: they travel
    with the policy's weights and are restored from its checkpoints."""

    CLIP = 10.0
    EPS = 1e-8
    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, size: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("var", torch.ones(size))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + self.EPS)).clamp(-self.CLIP, self.CLIP)

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        n = float(x.shape[0])
        if n == 0:
            return
        batch_mean, batch_var = x.mean(0), x.var(0, unbiased=False)
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean += delta * (n / total)
        self.var.copy_((self.var * self.count + batch_var * n + delta.square() * self.count * n / total) / total)
        self.count.copy_(total)
