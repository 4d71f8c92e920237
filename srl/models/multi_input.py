"""Actor-critic over Dict and Tuple observations ("multi-input"): one encoder per key, concatenated.

The policy is given the observation as a dict leaf path -> tensor [B, ...] (srl.spaces: nested
keys joined by '/', e.g. "image", "state/0"). Each leaf has an encoder, chosen by its space:

    "cnn"      an image (srl.images.is_image: a Box of 2 or 3 dims carried as uint8, HxW, HxWxC
               or CxHxW as srl.images.image_layout reads it) -> convolutions -> `cnn_features`
               ReLU units. Images of at least 36x36 get the Nature-DQN trunk (srl.models.cnn),
               smaller ones (grids such as MiniGrid's 7x7, MinAtar's 10x10) two 3x3 convolutions
               of stride 1. A 2-dim Box is one channel.
    "mlp"      any other Box (flattened) -> one tanh layer of `mlp_features` units
    "onehot"   Discrete and MultiDiscrete -> a one-hot vector (per component, concatenated)
    "flatten"  the values as floats, unchanged (MultiBinary's default)

uint8 values are scaled to [0, 1] by their space's bounds whatever their encoder
(srl.images.value_range: pixels 0..255 by 1/255, a 0/1 grid not at all). `encoders={"image": "flatten"}`
overrides the choice for a leaf path. The encodings are concatenated into one feature vector, and
an `ActorCriticMLP` over that vector (`hidden_sizes`; its action heads, sampling and log-probs)
acts and gives the value: this policy takes every action space that one takes. The encoders are
shared by the actor and the critic, so an image is convolved once per step, not twice.

It is what `policy=actor-critic-mlp` (the default) becomes for a Dict or Tuple observation
(srl.graph.policy_name). It also takes a single Box (its one leaf path is "").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.images import MIN_SIDE, carried_as_uint8, image_layout, is_image, value_range
from srl.models.cnn import nature_trunk
from srl.models.mlp import ActorCriticMLP, orthogonal
from srl.spaces import leaf_spaces

ENCODERS = ("cnn", "mlp", "onehot", "flatten")


def default_encoder(space: gym.Space) -> str:
    if is_image(space):
        return "cnn"
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
        return "onehot"
    if isinstance(space, gym.spaces.MultiBinary):
        return "flatten"
    return "mlp"


class _Float(nn.Module):
    """[B, ...] values -> float32, uint8 ones scaled to [0, 1] by their space's bounds."""

    def __init__(self, space: gym.Space) -> None:
        super().__init__()
        low, high = value_range(space) if carried_as_uint8(space) else (0.0, 1.0)
        self.low, self.scale = low, 1.0 / (high - low)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        if self.low:
            x = x - self.low
        return x * self.scale if self.scale != 1.0 else x


class Flatten(_Float):
    def __init__(self, space: gym.Space) -> None:
        super().__init__(space)
        self.size = self.features = int(np.prod(space.shape or ()))  # srl.spaces refuses shapeless leaves

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.reshape(len(x), self.size))


class VectorMLP(Flatten):
    def __init__(self, space: gym.Space, features: int) -> None:
        super().__init__(space)
        self.layer = orthogonal(nn.Linear(self.size, features))
        self.features = features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.layer(super().forward(x)))


class OneHot(nn.Module):
    """Discrete or MultiDiscrete values -> one one-hot block per component."""

    offsets: torch.Tensor  # a buffer (register_buffer)

    def __init__(self, space: gym.spaces.Discrete | gym.spaces.MultiDiscrete) -> None:
        super().__init__()
        if isinstance(space, gym.spaces.Discrete):
            sizes, start = np.array([space.n]), np.array([space.start])
        else:
            sizes, start = np.asarray(space.nvec).ravel(), np.asarray(space.start).ravel()
        # value v of component i -> position offsets[i] + v
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]) - start
        self.register_buffer("offsets", torch.as_tensor(offsets, dtype=torch.int64), persistent=False)
        self.features = int(sizes.sum())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = x.reshape(len(x), -1).long() + self.offsets
        return torch.zeros(len(x), self.features, device=x.device).scatter_(1, index, 1.0)


class ImageCNN(_Float):
    """An image [B, H, W, C], [B, C, H, W] or [B, H, W] -> [B, features]."""

    def __init__(self, space: gym.spaces.Box, features: int) -> None:
        super().__init__(space)
        layout = image_layout(tuple(space.shape))
        self.channels_last = layout.channels_last
        self.chw = c, h, w = layout.chw
        if min(h, w) >= MIN_SIDE:
            self.trunk = nature_trunk(c, h, w, features)
        else:  # a small image or grid: the Nature trunk's strides would leave nothing of it
            self.trunk = nn.Sequential(
                orthogonal(nn.Conv2d(c, 16, 3, padding=1)), nn.ReLU(),
                orthogonal(nn.Conv2d(16, 32, 3, padding=1)), nn.ReLU(),
                nn.Flatten(), orthogonal(nn.Linear(32 * h * w, features)), nn.ReLU(),
            )
        self.features = features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.channels_last:
            c, h, w = self.chw
            x = x.reshape(len(x), h, w, c).permute(0, 3, 1, 2)
        return self.trunk(super().forward(x.reshape(len(x), *self.chw)))


def make_encoder(path: str, space: gym.Space, name: str, cnn_features: int,
                 mlp_features: int) -> OneHot | Flatten | ImageCNN:
    if name not in ENCODERS:
        raise ValueError(f"encoders[{path!r}]: unknown encoder {name!r}; allowed: {', '.join(ENCODERS)}")
    if name == "cnn":
        if not (isinstance(space, gym.spaces.Box) and len(space.shape) in (2, 3)):
            raise ValueError(f"encoders[{path!r}]: 'cnn' needs an image (a Box of 2 or 3 dims), not {space}")
        return ImageCNN(space, cnn_features)
    if name == "onehot":
        if not isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            raise ValueError(f"encoders[{path!r}]: 'onehot' needs a Discrete or MultiDiscrete key, not {space}")
        return OneHot(space)
    return VectorMLP(space, mlp_features) if name == "mlp" else Flatten(space)


def leaf_encoders(observation_space: gym.Space, encoders: Mapping[str, str] | None, cnn_features: int,
                  mlp_features: int) -> tuple[dict[str, str], list[str], list[OneHot | Flatten | ImageCNN]]:
    """(leaf path -> encoder name, the leaf paths in order, one encoder module per path) of
    `observation_space`; `encoders` overrides the default choice for some paths."""
    leaves = leaf_spaces(observation_space)
    chosen = {path: default_encoder(space) for path, space in leaves.items()}
    unknown = sorted(set(encoders or {}) - set(leaves))
    if unknown:
        unknown_keys, keys = ", ".join(map(repr, unknown)), ", ".join(map(repr, leaves))
        raise ValueError(f"encoders: no observation key {unknown_keys}; the keys are {keys}")
    chosen.update(encoders or {})
    if min(cnn_features, mlp_features) <= 0:
        raise ValueError(f"cnn_features and mlp_features must be > 0, got {cnn_features}, {mlp_features}")
    paths = list(leaves)
    return chosen, paths, [make_encoder(path, leaves[path], chosen[path], cnn_features, mlp_features) for path in paths]


def encode_leaves(paths: Sequence[str], encoders: nn.ModuleList,
                  obs: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
    """obs (dict leaf path -> [B, ...], or one tensor for a single leaf) -> features [B, F]."""
    leaves = obs if isinstance(obs, Mapping) else {"": obs}
    return torch.cat([encoder(leaves[path]) for path, encoder in zip(paths, encoders)], dim=-1)


class ObservationEncoder(nn.Module):
    """Any observation srl holds (a Dict or Tuple of leaves, a Discrete, a Box) -> features [B, F]:
    multi-input's encoders per leaf, concatenated, as a module of its own, so that the policies
    of the other algorithms read what multi-input reads (q-mlp for DQN, squashed-gaussian-mlp and
    SAC's critics)."""

    def __init__(self, observation_space: gym.Space, encoders: Mapping[str, str] | None = None,
                 cnn_features: int = 128, mlp_features: int = 64) -> None:
        super().__init__()
        self.chosen, self.paths, built = leaf_encoders(observation_space, encoders, cnn_features, mlp_features)
        self.encoders = nn.ModuleList(built)
        self.features = sum(e.features for e in built)
        # what makes another encoder like this one (SAC's critics read as its actor reads)
        self.settings: dict[str, Any] = {"encoders": dict(self.chosen), "cnn_features": cnn_features,
                                         "mlp_features": mlp_features}

    def forward(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
        return encode_leaves(self.paths, self.encoders, obs)


def needs_encoder(observation_space: gym.Space) -> bool:
    """An observation that a flat MLP cannot read as it is: a Dict, Tuple or discrete one."""
    return not isinstance(observation_space, gym.spaces.Box)


class MultiInputActorCritic(Policy):
    """Encoders per observation key, concatenated, under ActorCriticMLP's actor and critic."""

    kind = "actor-critic"
    action_spaces = ActorCriticMLP.action_spaces
    composite_observations = True

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (64, 64),
        encoders: Mapping[str, str] | None = None,
        cnn_features: int = 128,
        mlp_features: int = 64,
    ) -> None:
        super().__init__(observation_space, action_space)
        self.encoders_chosen, self.paths, built = leaf_encoders(observation_space, encoders, cnn_features, mlp_features)
        # indexed, not keyed by path: a module name cannot hold '.', an observation key may
        self.encoders = nn.ModuleList(built)
        features = sum(e.features for e in built)
        trunk_space = gym.spaces.Box(-np.inf, np.inf, (features,), np.float32)
        self.head = ActorCriticMLP(trunk_space, action_space, hidden_sizes=hidden_sizes)

    def encode(self, obs: torch.Tensor | Mapping[str, torch.Tensor]) -> torch.Tensor:
        """obs (dict leaf path -> [B, ...], or one tensor for a single Box) -> features [B, F]."""
        return encode_leaves(self.paths, self.encoders, obs)

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return self.head.rollout_fields()

    def rollout(self, obs, deterministic: bool = False) -> dict[str, torch.Tensor]:
        return self.head.rollout(self.encode(obs), deterministic)

    def analyze(self, obs, action: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.head.analyze(self.encode(obs), action)

    def value(self, obs) -> torch.Tensor:
        return self.head.value(self.encode(obs))


register_policy("multi-input")(MultiInputActorCritic)
