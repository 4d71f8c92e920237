"""A policy that acts uniformly at random and has no parameters to learn: for measuring the
dataflow's sampling speed (`srl bench sampling`) without inference cost."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.spaces import num_rows


@register_policy("random")
class RandomPolicy(Policy):
    kind = "random"  # nothing to train: algorithm `none` only
    numpy_rollout = True  # the sampling benchmark measures the dataflow, not torch's per-call cost
    action_spaces = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary, gym.spaces.Box)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__(observation_space, action_space)
        if not isinstance(action_space, self.action_spaces):
            raise TypeError(f"random policy: unsupported action space {action_space}")
        # seeded from torch's generator, so the run's seed fixes numpy's actions too
        self._rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,))))

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        n, space = num_rows(obs), self.action_space  # (obs: a tensor, or a dict of them, srl.spaces)
        if isinstance(space, gym.spaces.Discrete):
            return {"action": torch.randint(int(space.start), int(space.start + space.n), (n,))}
        if not isinstance(space, gym.spaces.Box):
            return {"action": torch.from_numpy(self._entries(n))}
        low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
        return {"action": low + (high - low) * torch.rand(n, *space.shape)}

    def rollout_numpy(self, obs: np.ndarray) -> dict[str, np.ndarray]:
        """`rollout` without torch, for a whole group of rows at once: the sampling benchmark
        measures the dataflow, and torch's per-call overhead would dominate this policy."""
        n, space = num_rows(obs), self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return {"action": self._rng.integers(int(space.start), int(space.start + space.n), n)}
        if not isinstance(space, gym.spaces.Box):
            return {"action": self._entries(n)}
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        return {"action": low + (high - low) * self._rng.random((n, *space.shape), dtype=np.float32)}

    def _entries(self, n: int) -> np.ndarray:
        """n MultiDiscrete / MultiBinary actions, int64 like the categorical heads' (srl.graph.space_spec)."""
        low, high = _bounds(self.action_space)
        return self._rng.integers(low, high, (n, *low.shape), dtype=np.int64)

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError("the random policy does not train")


def _bounds(space: gym.Space) -> tuple[np.ndarray, np.ndarray]:
    """[low, high) of each entry of a MultiDiscrete / MultiBinary action."""
    if isinstance(space, gym.spaces.MultiBinary):
        return np.zeros(space.shape, np.int64), np.full(space.shape, 2, np.int64)
    assert isinstance(space, gym.spaces.MultiDiscrete)  # what is left of the action spaces it takes
    start = np.broadcast_to(np.asarray(space.start, np.int64), space.shape)
    return start, start + space.nvec
