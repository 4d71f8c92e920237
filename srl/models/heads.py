"""Categorical action distributions over the actor's output, shared by the actor-critic policies.

    dist = categorical_head(action_space)       # Discrete, MultiDiscrete or MultiBinary
    actor layer width: dist.logits_dim
    acting:    action, log_prob = dist.act(logits, deterministic)
    training:  log_prob, entropy = dist.evaluate(logits, action)

`logits` is [..., logits_dim] (any leading axes: [B] when acting, [T, B] for a recurrent unroll).

- Discrete(n, start): one categorical; actions int64 [...], offset by `start`.
- MultiDiscrete(nvec, start): one independent categorical per entry of `nvec` (factorised), over
  consecutive slices of the logits, sum(nvec) wide; log_prob and entropy are sums over the
  entries; actions int64 [..., *nvec.shape], offset by `start`. Deterministic actions are the
  argmax of each entry.
- MultiBinary(n): a MultiDiscrete of 2s (two logits per bit, so the same code serves both).

Sampling is Gumbel-max (argmax of logits + Gumbel noise, Gumbel = -log(Exponential(1))), about
half the cost of torch.multinomial on the small batches of a policy worker. Entries of different
sizes are padded to the largest with a very negative finite logit: it is never sampled, its
probability is exactly 0, and 0 * log p stays 0 in the entropy (-inf would give NaN there).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

PAD_LOGIT = -1e9
SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def categorical_head(space: gym.Space) -> Categorical | MultiCategorical:
    if isinstance(space, gym.spaces.Discrete):
        return Categorical(int(space.n), int(space.start))
    if isinstance(space, gym.spaces.MultiDiscrete):
        return MultiCategorical(np.asarray(space.nvec), np.asarray(space.start))
    if isinstance(space, gym.spaces.MultiBinary):
        shape = tuple(space.shape)
        return MultiCategorical(np.full(shape, 2), np.zeros(shape, np.int64))
    names = ", ".join(s.__name__ for s in SPACES)
    raise TypeError(f"a categorical head needs a {names} action space, got {space}")


def sample(logits: torch.Tensor, deterministic: bool) -> torch.Tensor:
    """Index of the sampled (or most likely) entry along the last axis."""
    if deterministic:
        return logits.argmax(dim=-1)
    return (logits - torch.empty_like(logits).exponential_().log_()).argmax(dim=-1)


def pick(log_probs: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return log_probs.gather(-1, index.unsqueeze(-1)).squeeze(-1)


def log_prob_entropy(log_probs: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-probability of entry `index` and the entropy of one categorical's log-probabilities."""
    return pick(log_probs, index), -(log_probs.exp() * log_probs).sum(-1)


class Categorical(nn.Module):
    """One categorical over n actions (Discrete); actions are index + start."""

    def __init__(self, n: int, start: int = 0) -> None:
        super().__init__()
        self.logits_dim, self.start = n, start

    def act(self, logits: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        index = sample(logits, deterministic)
        log_prob = pick(torch.log_softmax(logits, dim=-1), index)
        return (index + self.start if self.start else index), log_prob

    def evaluate(self, logits: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        index = action.reshape(logits.shape[:-1]).long() - self.start
        return log_prob_entropy(torch.log_softmax(logits, dim=-1), index)


class MultiCategorical(nn.Module):
    """Independent categoricals, one per entry of `nvec` (any shape), over consecutive logits."""

    pad_index: torch.Tensor  # buffers (register_buffer)
    start: torch.Tensor

    def __init__(self, nvec: np.ndarray, start: np.ndarray) -> None:
        super().__init__()
        sizes = nvec.reshape(-1).astype(np.int64)
        if sizes.size == 0 or (sizes < 1).any():
            raise ValueError(f"MultiDiscrete actions need nvec entries >= 1, got {nvec.tolist()}")
        self.action_shape = tuple(nvec.shape)
        self.entries, self.width = int(sizes.size), int(sizes.max())
        self.logits_dim = int(sizes.sum())
        # where each padded slot [entry, k] reads its logit; logits_dim = the pad column
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        k = np.arange(self.width)
        index = np.where(k < sizes[:, None], offsets[:, None] + k, self.logits_dim).reshape(-1)
        self.ragged = bool((sizes != self.width).any())  # equal sizes: a view, no gather
        self.register_buffer("pad_index", torch.as_tensor(index), persistent=False)
        flat_start = np.broadcast_to(start, nvec.shape).reshape(-1).astype(np.int64)
        self.offset = bool(flat_start.any())
        self.register_buffer("start", torch.as_tensor(flat_start), persistent=False)

    def log_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """[..., logits_dim] -> per-entry log-probabilities [..., entries, width] (pads: ~-1e9)."""
        lead = logits.shape[:-1]
        if self.ragged:
            pad = logits.new_full((*lead, 1), PAD_LOGIT)
            logits = torch.cat([logits, pad], dim=-1).index_select(-1, self.pad_index)
        return torch.log_softmax(logits.view(*lead, self.entries, self.width), dim=-1)

    def act(self, logits: torch.Tensor, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = self.log_probs(logits)
        index = sample(log_probs, deterministic)  # log-softmax keeps each entry's argmax
        log_prob = pick(log_probs, index).sum(-1)
        action = index + self.start if self.offset else index
        return action.view(*logits.shape[:-1], *self.action_shape), log_prob

    def evaluate(self, logits: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs = self.log_probs(logits)
        index = action.reshape(*logits.shape[:-1], self.entries).long()
        if self.offset:
            index = index - self.start
        entropy = -(log_probs.exp() * log_probs).sum((-2, -1))
        return pick(log_probs, index).sum(-1), entropy
