"""Soft Actor-Critic (Haarnoja et al., 2018) on replay batches: twin Q critics with Polyak
targets, a squashed Gaussian actor, and an automatically tuned entropy temperature.

One `step` on a replay batch (srl.data.replay.batch_fields; use replay.n_step = 1, the entropy of
intermediate steps is not in an n-step return):

    a', log p' ~ actor(next_obs)
    y       = reward + discount * (min_i Q_targ_i(next_obs, a') - alpha * log p')
    critics = mean(weight * ((Q_1 - y)^2 + (Q_2 - y)^2)) / 2
    actor   = mean(alpha * log p(a|obs) - min_i Q_i(obs, a)),  a ~ actor(obs), reparameterized
    alpha   : log_alpha -= lr * grad of -log_alpha * (log p + target_entropy)

The critics and the temperature live here, not in the policy: actors only need the actor. A
Dict/Tuple observation (a goal env's) is read by the actor through multi-input's encoders and by
the critics through an encoder of their own (TwinQ). The
priority written back is the larger of the two critics' |TD errors|.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from pydantic import Field

from srl import devices
from srl.algos.adam import Adam
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data import columns as C
from srl.models.mlp import mlp
from srl.models.multi_input import ObservationEncoder, needs_encoder
from srl.spaces import obs_of

# what a checkpoint keeps besides log_alpha: the critics and the three optimizers
CHECKPOINTED = ("critic", "critic_target", "actor_opt", "critic_opt", "alpha_opt")


class SACConfig(AlgorithmConfig):
    """SAC hyperparameters (gamma and n-step live in `replay`)."""

    actor_lr: float = Field(3e-4, gt=0, description="Adam learning rate of the actor.")
    critic_lr: float = Field(3e-4, gt=0, description="Adam learning rate of the twin critics.")
    alpha_lr: float = Field(3e-4, gt=0, description="Adam learning rate of log(alpha).")
    tau: float = Field(0.005, gt=0, le=1, description="Polyak step of the target critics after each update.")
    init_alpha: float = Field(1.0, gt=0, description="Initial entropy temperature.")
    autotune_alpha: bool = Field(True, description="Tune alpha so the policy entropy tracks target_entropy.")
    target_entropy: float | None = Field(None, description="Entropy target; None = -(action dimensions).")
    critic_hidden_sizes: list[int] = Field([256, 256], description="Hidden layer sizes of each critic MLP.")
    action_noise_beta: float = Field(
        0.0, ge=0, le=2, description="The actors' exploration noise: colored noise with power spectrum 1/f^beta "
        "(0: white, a fresh draw each step; 1: pink; 2: red). Above 0 a push persists for many steps, which "
        "tasks like MountainCarContinuous need (srl.algos.colored_noise); training is unchanged."
    )
    action_noise_period_steps: int = Field(
        1000, ge=2, description="action_noise_beta > 0: the steps of colored noise generated at a time, the "
        "longest correlation it holds (about an episode's length)."
    )


class TwinQ(torch.nn.Module):
    """Two Q(obs, action) MLPs. A Box observation is read flat; a Dict, Tuple or Discrete one
    through an encoder of its own, made as the actor's is (multi-input's encoders), shared by
    the two critics (as SB3's critics share one features extractor) and trained by their loss."""

    def __init__(self, encoder: ObservationEncoder | None, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.encoder = encoder
        in_dim = (encoder.features if encoder is not None else obs_dim) + act_dim
        self.q1, self.q2 = mlp(in_dim, hidden_sizes, 1), mlp(in_dim, hidden_sizes, 1)

    def forward(self, obs: Any, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.encoder(obs) if self.encoder is not None else obs.reshape(obs.shape[0], -1).float()
        x = torch.cat([features, action.reshape(action.shape[0], -1).float()], 1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def critic_encoder(policy: Policy) -> ObservationEncoder | None:
    """The critics' own encoder, made as the actor's (None: the actor reads its Box flat)."""
    actor_encoder = getattr(policy, "encoder", None)  # squashed-gaussian-mlp's, for a Dict/Tuple observation
    if isinstance(actor_encoder, ObservationEncoder):
        return ObservationEncoder(policy.observation_space, **actor_encoder.settings)
    if needs_encoder(policy.observation_space):
        return ObservationEncoder(policy.observation_space)
    return None


class SAC(Algorithm):
    policy_kind = "squashed-gaussian"  # a reparameterised `sample`: the actor loss differentiates through it
    action_spaces = (gym.spaces.Box,)
    needs_replay = True  # served by a buffer worker
    default_policy = "squashed-gaussian-mlp"
    # one update of 256 per env step (SB3's SAC), uniform 1-step replay (the entropy term of
    # intermediate steps is not in an n-step return)
    default_replay: ClassVar[dict[str, Any]] = {"batch_size": 256, "replay_ratio": 256.0, "prioritized": False, "n_step": 1}
    config: SACConfig

    def __init__(self, policy: Policy, config: SACConfig, total_env_steps: int) -> None:
        if not isinstance(config, SACConfig):
            raise TypeError(f"SAC needs a SACConfig, got {type(config).__name__}")
        self.require_kind(policy)  # a reparameterised `sample`
        super().__init__(policy, config, total_env_steps)
        encoder = critic_encoder(policy)
        obs_dim = 0 if encoder is not None else gym.spaces.flatdim(policy.observation_space)  # a Box: its size
        act_dim = gym.spaces.flatdim(policy.action_space)
        device = devices.of(policy)  # the critics and alpha live beside the actor
        self.critic = TwinQ(encoder, obs_dim, act_dim, config.critic_hidden_sizes).to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(float(np.log(config.init_alpha)), device=device, requires_grad=True)
        self.target_entropy = -float(act_dim) if config.target_entropy is None else config.target_entropy
        self.actor_opt = Adam(list(policy.parameters()), lr=config.actor_lr)
        self.critic_opt = Adam(list(self.critic.parameters()), lr=config.critic_lr)
        self.alpha_opt = Adam([self.log_alpha], lr=config.alpha_lr)

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        obs, next_obs, action = obs_of(batch), obs_of(batch, C.NEXT_OBS), batch[C.ACTION]  # leaf path -> tensor for a Dict
        update_stats = getattr(self.policy, "update_obs_stats", None)  # normalize_obs (srl.models.squashed_gaussian)
        if update_stats is not None:
            update_stats(obs)
        critic_view = getattr(self.policy, "normalize", lambda o: o)  # the critics read what the actor reads
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_action, next_log_prob = self.policy.sample(next_obs)
            q1_t, q2_t = self.critic_target(critic_view(next_obs), next_action)
            target = batch[C.REWARD] + batch[C.DISCOUNT] * (torch.min(q1_t, q2_t) - alpha * next_log_prob)
        obs_seen = critic_view(obs)
        q1, q2 = self.critic(obs_seen, action)
        critic_loss = 0.5 * (batch[C.WEIGHT] * ((q1 - target).square() + (q2 - target).square())).mean()
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()

        new_action, log_prob = self.policy.sample(obs)
        self.critic.requires_grad_(False)  # the actor's loss moves the actor only
        q_new = torch.min(*self.critic(obs_seen, new_action))
        self.critic.requires_grad_(True)
        actor_loss = (alpha * log_prob - q_new).mean()
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()

        if self.config.autotune_alpha:
            alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
            self.alpha_opt.zero_grad()
            alpha_loss.backward()
            self.alpha_opt.step()
        with torch.no_grad():
            for t, p in zip(self.critic_target.parameters(), self.critic.parameters()):
                t.lerp_(p, self.config.tau)
            batch[C.PRIORITY].copy_(torch.max((q1 - target).abs(), (q2 - target).abs()))
        return {
            "losses/critic_loss": critic_loss.item(),
            "losses/actor_loss": actor_loss.item(),
            "losses/alpha": alpha.item(),
            "losses/entropy": -log_prob.detach().mean().item(),
            "losses/q_mean": q1.detach().mean().item(),
        }

    def state_dict(self) -> dict[str, Any]:
        return {**{name: getattr(self, name).state_dict() for name in CHECKPOINTED}, "log_alpha": self.log_alpha.detach().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in CHECKPOINTED:
            getattr(self, name).load_state_dict(state[name])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])


register_algorithm("sac", SAC, SACConfig)
