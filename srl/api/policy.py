"""Policy contract: batched acting in policy workers, analysis with gradients in trainers.

The loop a policy takes part in::

    policy worker:  out = policy.rollout(obs_batch)          # no grad, many actors' requests
                    actions, out["log_prob"], ... -> actors -> stored in samples
    parameter service:  trainer publishes policy.state_dict() with a version; policy workers
                        load it with load_state_dict() when a newer version exists
    trainer:        algorithm.step(batch) calls policy.analyze(obs, actions) with grad

A `Policy` is a `torch.nn.Module`, so its parameters, devices and checkpoints are torch's.

`obs` is one tensor [B, ...] for a Box or Discrete observation space; for a Dict or Tuple space
it is a dict leaf path -> tensor [B, ...], nested keys joined by '/' ("image", "state/0"), each
leaf in its own dtype (uint8 images stay uint8); see srl.spaces and srl.models.multi_input.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch


@dataclass(frozen=True, init=False)
class FieldSpec:
    """Shape (per row, without the batch axis) and dtype of one array field."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape: tuple[int, ...], dtype: npt.DTypeLike) -> None:
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", np.dtype(dtype))  # np.float32 and "float32" alike


class Policy(torch.nn.Module, ABC):
    """Maps a batch of observations to actions, and explains them when training."""

    # Capability flags: what the policy is and offers, declared on its class. srl reads them and
    # never probes a policy for attributes: the check of algorithm, policy and env before launch
    # (srl.config.compat), the algorithms (Algorithm.require_kind) and the workers that act with it.
    # kind: what an algorithm may ask for (Algorithm.policy_kind): "actor-critic" (rollout emits
    # log_prob and value; analyze gives log_prob, entropy, value), "q-network" (`q_values`, or with
    # recurrent `q_sequence`: Q values per discrete action), "squashed-gaussian" (reparameterised
    # `sample`); None = undeclared: unchecked before launch, refused by an algorithm that needs one.
    kind: ClassVar[str | None] = None
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = ()  # the action spaces it acts in; () = undeclared
    # recurrent: keeps a state between steps (srl.models.recurrent): has `state_size` and
    # `rollout_recurrent`, and `episodes_ended` matters
    recurrent: ClassVar[bool] = False
    # composite_observations: reads Dict and Tuple observations (a dict leaf path -> tensor), not
    # only one tensor; srl.graph names the policies that do when one that does not is given one
    composite_observations: ClassVar[bool] = False
    numpy_rollout: ClassVar[bool] = False  # has `rollout_numpy`: acting without torch's per-call cost
    # graph_safe: `rollout` never syncs with the host and its shapes follow the batch's only, so
    # acting on CUDA may capture it as a CUDA graph (devices.policy_graphs=auto; srl.workers.cuda_acting)
    graph_safe: ClassVar[bool] = False
    state_size: int = 0  # recurrent: floats of state per row, set by the policy
    # a rollout output whose value at an episode's last step names who played it (a league's
    # opponent, srl.population.league_pool): the actor reports each such episode's result under it
    episode_tag: ClassVar[str | None] = None

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        self.observation_space = observation_space
        self.action_space = action_space

    @abstractmethod
    def rollout_fields(self) -> dict[str, FieldSpec]:
        """The extra per-row outputs of `rollout` besides "action" (e.g. log_prob, value).

        They travel back to the actor with the action and are stored in its samples.
        """

    def input_fields(self) -> dict[str, FieldSpec]:
        """Per-row inputs the actor writes next to "obs" (e.g. "first" for recurrent policies)."""
        return {}

    @abstractmethod
    def rollout(self, obs: Any, deterministic: bool = False) -> dict[str, torch.Tensor]:
        """Act on obs [B, ...] (or a dict of them, see above): return {"action": [B, ...], **rollout_fields}.
        Called without grad."""

    @abstractmethod
    def analyze(self, obs: Any, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """Training-side view of (obs, action) with grad, e.g. log_prob, entropy, value."""

    # What a kind offers (see `kind` above): the policies of that kind override these; srl calls
    # them only where the flags say they are there.

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """State value of obs [B, ...] -> [B]; actor-critic policies override it."""
        raise NotImplementedError(f"{type(self).__name__} has no value head")

    def q_values(self, obs: Any) -> torch.Tensor:
        """kind "q-network": obs [B, ...] -> Q [B, actions] (action = the Discrete space's start + index)."""
        raise NotImplementedError(f"{type(self).__name__} is not a q-network")

    def sample(self, obs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """kind "squashed-gaussian": (action [B, ...], log_prob [B]), reparameterised (differentiable)."""
        raise NotImplementedError(f"{type(self).__name__} is not a squashed-gaussian policy")

    def analyze_sequence(self, obs: torch.Tensor, action: torch.Tensor, state: torch.Tensor,
                         first: torch.Tensor) -> dict[str, torch.Tensor]:
        """recurrent "actor-critic": `analyze` through a segment [T, B] from its stored state [B, S]."""
        raise NotImplementedError(f"{type(self).__name__} is not a recurrent actor-critic")

    def q_sequence(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """recurrent "q-network": Q [T, B, actions] through a segment from its stored state [B, S]."""
        raise NotImplementedError(f"{type(self).__name__} is not a recurrent q-network")

    def rollout_numpy(self, obs: Any) -> dict[str, np.ndarray]:
        """`rollout` on numpy arrays, without torch; offered by a policy that declares
        `numpy_rollout = True` (used instead of `rollout` outside deterministic mode)."""
        raise NotImplementedError(f"{type(self).__name__} declares no numpy_rollout")

    def rollout_recurrent(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor,
                          deterministic: bool = False) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Recurrent policies: obs [B, ...], state [B, state_size] and `first` [B] (the row starts
        an episode) -> (the rollout outputs, the next state); see srl.models.recurrent."""
        raise NotImplementedError(f"{type(self).__name__} is not recurrent")

    def episodes_ended(self, done: np.ndarray) -> None:
        """After each env step of a caller that keeps no state ([B] bool: the rows whose episode
        ended): a recurrent policy's `rollout` starts those rows over. Others keep nothing."""
