"""What PPO and APPO / IMPALA share: one Adam over the policy's trainable parameters, a learning
rate annealed linearly over env steps to a floor, the loss weights and gradient clipping, and the
optimizer state a checkpoint keeps. Each subclass computes its own targets and loss."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from pydantic import Field

from srl.algos.adam import Adam
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import Policy


class ActorCriticConfig(AlgorithmConfig):
    """The hyperparameters of every on-policy actor-critic here."""

    lr: float = Field(1e-3, gt=0, description="Adam learning rate (the initial one if anneal_lr).")
    anneal_lr: bool = Field(True, description="Decay the learning rate linearly to its floor over anneal_env_steps.")
    anneal_env_steps: int | None = Field(
        None, gt=0, description="Env steps over which lr decays linearly to its floor; None = total_env_steps."
    )
    final_lr_fraction: float = Field(
        0.0, ge=0, le=1, description="The floor, as a fraction of lr, kept after anneal_env_steps (0 = decay to 0)."
    )
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    value_coef: float = Field(0.5, ge=0, description="Weight of the value loss (0.5 * mean squared error).")
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    normalize_advantage: bool = Field(
        True, description="Normalize advantages to zero mean, unit std within each minibatch."
    )
    max_grad_norm: float | None = Field(
        0.5, gt=0, description="Clip the global gradient norm to this; None disables clipping."
    )
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")


class ActorCritic(Algorithm):
    """Adam over the policy, the annealed learning rate and the clipped gradient step."""

    policy_kind = "actor-critic"
    # MultiDiscrete / MultiBinary: factorised categoricals (srl.models.heads); the algorithms
    # only read the policy's summed log_prob and entropy, one number per row
    action_spaces = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary, gym.spaces.Box)

    config: ActorCriticConfig

    def __init__(self, policy: Policy, config: ActorCriticConfig, total_env_steps: int) -> None:
        if config.anneal_lr and total_env_steps <= 0:
            raise ValueError(f"anneal_lr needs total_env_steps > 0, got {total_env_steps}")
        super().__init__(policy, config, total_env_steps)
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer = Adam(self.params, lr=config.lr, eps=config.adam_eps)

    def learning_rate(self, env_steps: int | torch.Tensor) -> float | torch.Tensor:
        """The rate at `env_steps`; a device tensor for a device count (a pod's: computed there)."""
        if isinstance(env_steps, torch.Tensor):
            # float32 on CUDA (the fused kernel reads a float rate), float64 elsewhere (the Python rate, exactly)
            dtype = torch.float32 if env_steps.device.type == "cuda" else torch.float64
            rate = torch.ones((), dtype=dtype, device=env_steps.device) * self.config.lr
            if not self.config.anneal_lr:
                return rate
            horizon = self.config.anneal_env_steps or self.total_env_steps
            floor = self.config.final_lr_fraction
            left = (1.0 - (1.0 - floor) * env_steps.to(torch.float64) / horizon).clamp(min=floor)
            return rate * left.to(dtype)
        if not self.config.anneal_lr:
            return self.config.lr
        horizon = self.config.anneal_env_steps or self.total_env_steps
        floor = self.config.final_lr_fraction
        return self.config.lr * max(floor, 1.0 - (1.0 - floor) * env_steps / horizon)

    def _set_learning_rate(self, env_steps: int | torch.Tensor) -> float | torch.Tensor:
        """Sets the optimizer's rate for an update at `env_steps`; returns it."""
        lr = self.learning_rate(env_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def _optimize(self, loss: torch.Tensor) -> None:
        """One Adam step on `loss`, the global gradient norm clipped at max_grad_norm."""
        self.optimizer.zero_grad()
        loss.backward()
        if self.config.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.config.max_grad_norm, foreach=True)
        self.optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


def normalized(advantage: torch.Tensor, normalize: bool) -> torch.Tensor:
    """Advantages scaled to zero mean and unit std (unchanged if not `normalize` or a single one)."""
    if not normalize or advantage.numel() < 2:
        return advantage
    return (advantage - advantage.mean()) / (advantage.std() + 1e-8)


def explained_variance(prediction: torch.Tensor, target: torch.Tensor) -> float:
    """1 - Var[target - prediction] / Var[target]; nan when the targets are constant."""
    var = target.var()
    if var.item() == 0.0:
        return float("nan")
    return (1.0 - (target - prediction).var() / var).item()


def explained_variance_tensor(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`explained_variance` left on the device (a 0-dim tensor; nan when the targets are constant)."""
    var = target.var()
    explained = 1.0 - (target - prediction).var() / var
    return torch.where(var == 0.0, torch.full_like(explained, float("nan")), explained)
