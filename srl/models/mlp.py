"""Actor-critic MLP for flat (Box) observations and Discrete, MultiDiscrete, MultiBinary or Box actions,
and the layer builders the other policies share (`orthogonal`, `mlp`).

Two separate MLPs (tanh, or ReLU with policy_kwargs.activation="relu"): the actor maps the
flattened observation to logits (categorical actions, srl.models.heads) or to the mean of a
diagonal Gaussian (Box, with a state-independent log-std parameter); the critic maps it to a
scalar value. `rollout` is the inference hot path (batches of 8..256 rows in a policy worker), so
it avoids `torch.distributions` (several times the cost of the network itself on small batches)
and computes samples and log-probabilities with a handful of plain tensor ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.data import columns
from srl.models.heads import SPACES as CATEGORICAL_SPACES
from srl.models.heads import categorical_head

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# the hidden layers' nonlinearity (policy_kwargs.activation), in place: see _forward
ACTIVATIONS = {"tanh": torch.Tensor.tanh_, "relu": torch.Tensor.relu_}


Layer = TypeVar("Layer", nn.Linear, nn.Conv2d)


def orthogonal(layer: Layer, gain: float = math.sqrt(2.0)) -> Layer:
    """`layer` with orthogonal weights of `gain` (default: for tanh / ReLU units) and zero biases."""
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:  # every layer here has one; Conv2d's is typed optional
        nn.init.zeros_(layer.bias)
    return layer


def mlp(in_dim: int, hidden_sizes: Sequence[int], out_dim: int, activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers with `activation` between them (torch's default initialisation)."""
    layers: list[nn.Module] = []
    for a, b in zip((in_dim, *hidden_sizes), hidden_sizes):
        layers += [nn.Linear(a, b), activation()]
    return nn.Sequential(*layers, nn.Linear(hidden_sizes[-1] if hidden_sizes else in_dim, out_dim))


def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    return torch.addmm(layer.bias, x, layer.weight.t())


class ActorCriticMLP(Policy):
    """Separate actor and critic MLPs (tanh or ReLU hidden layers) over the flattened observation.

    Actions: Discrete -> int64 [B] (offset by the space's `start`); MultiDiscrete / MultiBinary ->
    int64 [B, *shape], one categorical per entry (srl.models.heads); Box -> float32 [B, *shape],
    sampled from N(mean, exp(log_std)^2) and returned unclipped (the environment side clips).

    Layout: the two MLPs have the same hidden sizes, so their hidden layers are stored stacked
    (`hidden_weight[k]` is [2, in, out], index 0 = actor, 1 = critic) and evaluated with one
    `baddbmm` per layer; the networks share no weights. On small batches the cost is per-op
    overhead, and this halves the op count of rollout and analyze compared with two
    nn.Sequential(Linear, Tanh, ...) stacks. The output layers are ordinary `actor_head` and
    `critic_head` Linear modules.
    """

    kind = "actor-critic"
    graph_safe = True  # sampling by Gumbel-max on the device, no host sync (srl.workers.cuda_acting)
    action_spaces = (*CATEGORICAL_SPACES, gym.spaces.Box)

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (64, 64),
        log_std_init: float = 0.0,
        activation: str = "tanh",
    ) -> None:
        super().__init__(observation_space, action_space)
        if activation not in ACTIVATIONS:
            raise ValueError(f"policy_kwargs.activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self._act = ACTIVATIONS[activation]
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(
                f"ActorCriticMLP needs a Box observation space, got {type(observation_space).__name__}"
            )
        hidden_sizes = tuple(int(h) for h in hidden_sizes)
        if any(h <= 0 for h in hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive, got {hidden_sizes}")
        self.hidden_sizes = hidden_sizes

        if isinstance(action_space, gym.spaces.Box):
            self.discrete, self.dist = False, None
            self.action_shape: tuple[int, ...] = tuple(action_space.shape)
            head_dim = int(np.prod(self.action_shape))
        elif isinstance(action_space, CATEGORICAL_SPACES):
            self.discrete = True  # categorical: Discrete, MultiDiscrete or MultiBinary
            self.dist = categorical_head(action_space)
            head_dim = self.dist.logits_dim
        else:
            names = ", ".join(s.__name__ for s in self.action_spaces)
            raise TypeError(f"ActorCriticMLP needs a {names} action space, got {type(action_space).__name__}")

        self.obs_dim = int(np.prod(observation_space.shape))
        dims = (self.obs_dim, *hidden_sizes)
        self.hidden_weight = nn.ParameterList()
        self.hidden_bias = nn.ParameterList()
        for in_dim, out_dim in zip(dims[:-1], dims[1:]):
            weight = torch.empty(2, in_dim, out_dim)
            for net in range(2):  # the actor's and the critic's layer, each orthogonal
                nn.init.orthogonal_(weight[net], math.sqrt(2.0))
            self.hidden_weight.append(nn.Parameter(weight))
            self.hidden_bias.append(nn.Parameter(torch.zeros(2, 1, out_dim)))
        self.actor_head = orthogonal(nn.Linear(dims[-1], head_dim), gain=0.01)
        self.critic_head = orthogonal(nn.Linear(dims[-1], 1), gain=1.0)
        # Gaussian log-std, shared by all states; absent for Discrete actions. Below 0 (std < 1) for
        # tasks where wide early noise only costs (MuJoCo locomotion: rl-zoo starts Hopper at -2).
        self.log_std = None if self.discrete else nn.Parameter(torch.full((head_dim,), float(log_std_init)))

    # -- contract ---------------------------------------------------------------------------------

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {
            columns.LOG_PROB: FieldSpec((), np.float32),
            columns.VALUE: FieldSpec((), np.float32),
        }

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        head, value = self._forward(obs)
        if self.dist is not None:
            action, log_prob = self.dist.act(head, deterministic)
        else:
            log_std = self.log_std
            assert log_std is not None  # Box actions: a Gaussian head has one
            if deterministic:
                flat = head
                sq = torch.zeros_like(head)
            else:
                noise = torch.randn_like(head)
                flat = head + noise * log_std.exp()
                sq = noise * noise
            # log N(a; mean, std) with (a - mean) / std = noise, summed over action dims.
            log_prob = (-0.5 * sq - log_std).sum(-1) - _HALF_LOG_2PI * head.shape[-1]
            action = flat.reshape(flat.shape[0], *self.action_shape)
        return {"action": action, columns.LOG_PROB: log_prob, columns.VALUE: value}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"log_prob": [B], "entropy": [B], "value": [B]}, differentiable."""
        head, value = self._forward(obs)
        batch = head.shape[0]
        if self.dist is not None:
            log_prob, entropy = self.dist.evaluate(head, action)
        else:
            log_std = self.log_std
            assert log_std is not None  # Box actions: a Gaussian head has one
            z = (action.reshape(head.shape).to(head.dtype) - head) * torch.exp(-log_std)
            log_prob = (-0.5 * z * z - log_std).sum(-1) - _HALF_LOG_2PI * head.shape[-1]
            entropy = (log_std + 0.5 + _HALF_LOG_2PI).sum().expand(batch)
        return {columns.LOG_PROB: log_prob, "entropy": entropy, columns.VALUE: value}

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Critic only: obs [B, ...] -> [B]."""
        x = self._flat(obs)
        for weight, bias in zip(self.hidden_weight, self.hidden_bias):
            x = self._act(torch.addmm(bias[1], x, weight[1]))
        return _linear(self.critic_head, x).squeeze(-1)

    # -- helpers ----------------------------------------------------------------------------------

    def _forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, ...] -> (actor output [B, head_dim], value [B])."""
        x = self._flat(obs)
        h = x.expand(2, *x.shape)  # [2 nets, B, features], no copy
        for weight, bias in zip(self.hidden_weight, self.hidden_bias):
            # In-place tanh / relu is autograd-safe: baddbmm's backward does not need its output.
            h = self._act(torch.baddbmm(bias, h, weight))
        return _linear(self.actor_head, h[0]), _linear(self.critic_head, h[1]).squeeze(-1)

    def _flat(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(obs.shape[0], self.obs_dim)
        return x if x.dtype == torch.float32 else x.float()


register_policy("actor-critic-mlp")(ActorCriticMLP)
