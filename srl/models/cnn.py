"""Actor-critic over image observations: the Nature-DQN convolutional trunk ("actor-critic-cnn").

Observations are [H, W] (one grey frame, srl.envs.atari), [C, H, W] (stacked frames) or [H, W, C]
(an RGB frame such as Crafter's 64x64x3), laid out as srl.images.image_layout reads them; values
are scaled to [0, 1] by the space's bounds (pixels 0..255 by 1/255, a 0/1 grid not at all). The trunk is
conv 32x8x8 stride 4, 64x4x4 stride 2, 64x3x3 stride 1, then a 512-unit linear layer, all ReLU,
shared by a policy head (Discrete logits, orthogonal gain 0.01) and a value head (gain 1): the
network of Mnih et al. 2015 as the PPO paper's Atari runs use it.

`trunk_precision="bfloat16"` runs the trunk (nearly all of the network's arithmetic) under
bfloat16 autocast, mixed precision: weights, gradients and Adam's state stay float32, the trunk's
convolutions and its linear layer compute in bfloat16, and the heads, log-probabilities and values
are float32 again. Acting and training use the same trunk, so the stored behaviour log-probs and
the trainer's agree as they do in float32. "auto" chooses bfloat16 where the hardware computes it
natively (a CPU with AVX512-BF16 or AMX, a CUDA GPU with bf16), float32 elsewhere.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.data import columns
from srl.images import MIN_SIDE, image_layout, value_range
from srl.models.heads import log_prob_entropy, pick, sample
from srl.models.mlp import orthogonal

TRUNK_PRECISIONS = ("float32", "bfloat16", "auto")


@functools.cache
def native_bfloat16(device_type: str) -> bool:
    """Whether `device_type` ("cpu", "cuda") has bfloat16 arithmetic units, so that bfloat16
    convolutions run faster than float32 ones there rather than being emulated more slowly."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device_type == "cpu":
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch >= 2.2
        return any(getattr(torch.cpu, name, lambda: False)() for name in probes)
    return False


def nature_trunk(channels: int, height: int, width: int, features: int = 512) -> nn.Sequential:
    convs = nn.Sequential(
        orthogonal(nn.Conv2d(channels, 32, 8, stride=4)), nn.ReLU(),
        orthogonal(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
        orthogonal(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
        nn.Flatten(),
    )
    with torch.no_grad():
        flat = convs(torch.zeros(1, channels, height, width)).shape[1]
    return nn.Sequential(*convs, orthogonal(nn.Linear(flat, features)), nn.ReLU())


@register_policy("actor-critic-cnn")
class ActorCriticCNN(Policy):
    """Nature CNN trunk shared by a categorical policy head and a value head (Discrete actions)."""

    kind = "actor-critic"
    graph_safe = True  # sampling by Gumbel-max on the device, no host sync (srl.workers.cuda_acting)
    action_spaces = (gym.spaces.Discrete,)

    def __init__(
        self, observation_space: gym.Space, action_space: gym.Space, features: int = 512, trunk_precision: str = "float32"
    ) -> None:
        super().__init__(observation_space, action_space)
        if trunk_precision not in TRUNK_PRECISIONS:
            raise ValueError(f"trunk_precision must be one of {list(TRUNK_PRECISIONS)}, got {trunk_precision!r}")
        self.trunk_precision = trunk_precision
        if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) not in (2, 3):
            raise TypeError(f"actor-critic-cnn needs Box image observations [H, W] or [C, H, W], got {observation_space}")
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"actor-critic-cnn needs a Discrete action space, got {action_space}")
        shape = tuple(observation_space.shape)
        self.layout = image_layout(shape)
        # as the env gives the rows: permuted to [C, H, W] in _forward where channels come last
        self.image_shape = (self.layout.height, self.layout.width, self.layout.channels) if self.layout.channels_last \
            else self.layout.chw
        channels, height, width = self.layout.chw
        if min(height, width) < MIN_SIDE:
            raise ValueError(f"actor-critic-cnn needs images of at least {MIN_SIDE}x{MIN_SIDE} (the trunk's strides), "
                             f"got {shape} read as {self.layout.name} ({height}x{width}, {channels} channels); "
                             "smaller images take policy=multi-input (its small-image convolutions)")
        self.value_low, high = value_range(observation_space)
        self.value_scale = 1.0 / (high - self.value_low)
        self.trunk = nature_trunk(channels, height, width, features)
        self.actor_head = orthogonal(nn.Linear(features, int(action_space.n)), 0.01)
        self.critic_head = orthogonal(nn.Linear(features, 1), 1.0)
        self.action_start = int(action_space.start)

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {columns.LOG_PROB: FieldSpec((), np.float32), columns.VALUE: FieldSpec((), np.float32)}

    def _forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bfloat16 = self._bfloat16(obs.device.type)
        # Channels-last input lets oneDNN pick its faster convolution kernels on CPU: a PPO
        # minibatch of 256 frames trains about 20% faster here (2-core EPYC, torch 2.13). The
        # pixels are laid out while still uint8 and converted once, straight to the dtype the
        # first convolution computes in: the frames are a minibatch's largest tensor.
        x = obs.reshape(obs.shape[0], *self.image_shape)
        if self.layout.channels_last:
            x = x.permute(0, 3, 1, 2)  # a view: [B, C, H, W] whose memory is already channels-last
        x = x.contiguous(memory_format=torch.channels_last)
        x = x.to(torch.bfloat16 if bfloat16 else torch.float32, copy=True)
        if self.value_low:
            x.sub_(self.value_low)
        if self.value_scale != 1.0:
            x.mul_(self.value_scale)
        with torch.autocast(obs.device.type, dtype=torch.bfloat16, enabled=bfloat16):
            h = self.trunk(x)
        h = h.float()  # the heads and everything computed from them stay float32
        return torch.log_softmax(self.actor_head(h), dim=-1), self.critic_head(h).squeeze(-1)

    def _bfloat16(self, device_type: str) -> bool:
        if self.trunk_precision == "auto":
            return native_bfloat16(device_type)
        return self.trunk_precision == "bfloat16"

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        log_probs, value = self._forward(obs)
        index = sample(log_probs, deterministic)
        return {"action": index + self.action_start, columns.LOG_PROB: pick(log_probs, index), columns.VALUE: value}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        log_probs, value = self._forward(obs)
        log_prob, entropy = log_prob_entropy(log_probs, action.reshape(-1).long() - self.action_start)
        return {columns.LOG_PROB: log_prob, "entropy": entropy, columns.VALUE: value}

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self._forward(obs)[1]
