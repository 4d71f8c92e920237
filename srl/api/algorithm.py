"""Algorithm contract: one update of a policy on one batch of samples.

The loop an algorithm takes part in (inside the trainer worker)::

    batch = sample stream -> trainer gathers segments  # dict of tensors, see srl.data.columns
    stats = algorithm.step(batch)                      # gradients, optimizer; returns floats
    parameter service <- policy.state_dict(), version += 1

A batch holds whole segments: every column is shaped [T + 1, B, ...], where T is the
experiment's `sample_length` and B the number of rows gathered. Row t of reward / terminated /
truncated describes the transition from step t to t + 1; the last time row (t = T) carries only
the observation and policy outputs to bootstrap from.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import gymnasium as gym
import torch
from pydantic import BaseModel, ConfigDict

from srl.api.policy import Policy


class AlgorithmConfig(BaseModel):
    """Base of every algorithm's typed hyperparameters (each field documented on the field)."""

    # no NaN or infinity: a hyperparameter that is one would only make the losses NaN later
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class Algorithm(ABC):
    """Updates `policy` from batches of samples."""

    # What the algorithm trains, checked against the policy's declarations (srl.api.Policy) and
    # the env's action space before launch (srl.config.compat); the defaults accept anything.
    policy_kind: ClassVar[str | None] = None  # the Policy.kind it needs; None = any policy
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = ()  # the action spaces it handles; () = any
    needs_replay: ClassVar[bool] = False  # learns from a buffer worker's replay batches (`replay`), not segments
    team_transitions: ClassVar[bool] = False  # its replay items hold every agent of an env (srl.data.team)
    trains_recurrent: ClassVar[bool] = False  # can train a recurrent policy
    needs_recurrent: ClassVar[bool] = False  # trains recurrent policies only
    # What `algorithm=<name>` alone brings (srl.config.checks.algorithm_defaults): the policy when the
    # config names none (None: the config's default, actor-critic-mlp), and for a replay algorithm
    # the `replay` fields when it sets none. default_replay holds a replay_ratio: without one the
    # trainer updates as fast as it can, thousands of times per transition on a slow env.
    default_policy: ClassVar[str | None] = None
    default_replay: ClassVar[dict[str, Any]] = {}

    def __init__(self, policy: Policy, config: AlgorithmConfig, total_env_steps: int) -> None:
        self.policy = policy
        self.config = config
        self.total_env_steps = total_env_steps  # for schedules (learning-rate annealing)

    @classmethod
    def require_kind(cls, policy: Policy) -> None:
        """For an algorithm that calls its kind's own methods (q_values, sample, q_sequence): raise
        TypeError unless `policy` declares `policy_kind`, and recurrence as this algorithm trains it.
        (Before launch srl.config.compat says the same, naming the config fields.)"""
        recurrence_fits = cls.trains_recurrent if policy.recurrent else not cls.needs_recurrent
        if policy.kind != cls.policy_kind or not recurrence_fits:
            wanted = ("a recurrent " if cls.needs_recurrent else "a feed-forward " if not cls.trains_recurrent else "a ")
            got = f"{'recurrent' if policy.recurrent else 'feed-forward'}, kind {policy.kind!r}"
            raise TypeError(f"{cls.__name__} needs {wanted}policy that declares kind = {cls.policy_kind!r} "
                            f"(srl.api.Policy), got {type(policy).__name__} ({got})")

    @classmethod
    def check_batch(cls, config: AlgorithmConfig, sample_length: int, rows: int) -> None:
        """Raise ValueError if batches of [sample_length + 1, rows] cannot work (checked before launch)."""

    @abstractmethod
    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        """One update on `batch`; `env_steps` = steps consumed so far. Return scalar stats."""

    def state_dict(self) -> dict[str, Any]:
        """Everything but the policy needed to resume (optimizer, schedules)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
