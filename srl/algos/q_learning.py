"""What DQN and R2D2 share: an online Q-network trained with Adam, a target network that follows
it every `target_update_interval` updates, and the state a checkpoint keeps (optimizer, target,
update count). Each subclass computes its own loss and priorities."""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Protocol, cast

import gymnasium as gym
import torch

from srl.algos.adam import Adam
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import Policy


class QLearningSettings(Protocol):
    """The fields of DQNConfig and R2D2Config this class reads (each config its own defaults)."""

    lr: float
    adam_eps: float
    max_grad_norm: float | None
    target_update_interval: int


class QLearning(Algorithm):
    policy_kind = "q-network"
    action_spaces = (gym.spaces.Discrete,)
    needs_replay = True  # served by a buffer worker, not raw segments
    default_policy = "q-mlp"
    # one update of 128 transitions per 4 env steps (SB3's DQN: train_freq 4, one gradient step)
    default_replay: ClassVar[dict[str, Any]] = {"batch_size": 128, "replay_ratio": 32.0}

    def __init__(self, policy: Policy, config: AlgorithmConfig, total_env_steps: int) -> None:
        self.require_kind(policy)  # q_values / q_sequence
        if not isinstance(policy.action_space, gym.spaces.Discrete):
            raise TypeError(f"{type(self).__name__} needs a Discrete action space, got {policy.action_space}")
        super().__init__(policy, config, total_env_steps)
        self.action_start = int(policy.action_space.start)  # action = start + the index of its Q value
        self.target = copy.deepcopy(policy).requires_grad_(False)
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.settings = cast(QLearningSettings, config)  # a subclass's config has these fields
        self.optimizer = Adam(self.params, lr=self.settings.lr, eps=self.settings.adam_eps)
        self.updates = 0

    def _optimize(self, loss: torch.Tensor) -> float:
        """One gradient step on `loss` (norm clipped at max_grad_norm), then the target's turn
        if due; returns the gradient norm before clipping."""
        self.optimizer.zero_grad()
        loss.backward()
        max_norm = self.settings.max_grad_norm or float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm, foreach=True)
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.settings.target_update_interval == 0:
            self._update_target()
        return float(grad_norm)

    def _td_step(self, loss: torch.Tensor, q: torch.Tensor, td_abs: torch.Tensor) -> dict[str, float]:
        """`_optimize(loss)`; the stats of the update, with the Q values of the actions taken and |TD|."""
        return {
            "losses/td_loss": loss.item(),
            "losses/q_mean": q.detach().mean().item(),
            "losses/td_abs_mean": td_abs.mean().item(),
            "losses/grad_norm": self._optimize(loss),
        }

    @torch.no_grad()
    def _update_target(self) -> None:
        self.target.load_state_dict(self.policy.state_dict())

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "target": self.target.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.target.load_state_dict(state["target"])
        self.updates = int(state["updates"])
