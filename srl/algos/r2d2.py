"""Recurrent DQN with stored state and burn-in (R2D2, Kapturowski et al., 2019), on the buffer worker.

The buffer stores each segment row as a sequence of T + 1 steps with the core's state at step 0
(srl.data.sequences) and samples sequences by priority. One `step` on a batch [B, T + 1]:

    Q_online, Q_target = policy / target .q_sequence(obs, hidden, first)   (both from the stored state)
    target_t = n-step return_t + discount_t * Q_target(next_t, argmax_a Q_online(next_t, a))
    loss     = mean over sequences of weight * mean_{t >= burn_in} huber(target_t - Q_online(t, action_t))

n-step returns, discounts and bootstrap rows come from srl.data.nstep inside each sequence (cut at
terminations, truncations and the sequence's end). The first `burn_in` steps only warm the state
up under the current parameters (their Q values enter no loss). A sequence's new priority is
R2D2's mix 0.9 * max|TD| + 0.1 * mean|TD| over its loss steps. With recurrent-q, `replay`'s
capacity, warmup and batch_size count sequences; its gamma and n_step are unused (these here are).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from pydantic import Field

from srl.algos.exploration import EpsilonGreedyConfig
from srl.algos.q_learning import QLearning
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data import columns as C
from srl.data.nstep import nstep_returns

PRIORITY_MAX_WEIGHT = 0.9  # R2D2's eta


class R2D2Config(EpsilonGreedyConfig):
    """Recurrent DQN hyperparameters."""

    lr: float = Field(1e-3, gt=0, description="Adam learning rate.")
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount of the n-step returns and of the bootstrap.")
    n_step: int = Field(3, ge=1, description="Steps summed in each return before bootstrapping (within a sequence).")
    burn_in: int = Field(
        4, ge=0, description="Steps at the start of each sequence that only warm the state up (no loss); "
        "must be < sample_length."
    )
    target_update_interval: int = Field(100, ge=1, description="Updates between copies of the online network into the target.")
    huber_delta: float = Field(1.0, gt=0, description="TD errors beyond this are penalised linearly.")
    max_grad_norm: float | None = Field(10.0, gt=0, description="Clip the global gradient norm; None = off.")


class R2D2(QLearning):
    trains_recurrent = needs_recurrent = True  # q_sequence: Q values through time from a stored state
    default_policy = "recurrent-q"
    # the recurrent experiment's (srl.experiments.recurrent): batches of 32 sequences, half an
    # update per stored sequence
    default_replay: ClassVar[dict[str, Any]] = {"capacity": 5_000, "batch_size": 32, "warmup": 64, "replay_ratio": 16.0}
    config: R2D2Config

    def __init__(self, policy: Policy, config: R2D2Config, total_env_steps: int) -> None:
        if not isinstance(config, R2D2Config):
            raise TypeError(f"R2D2 needs an R2D2Config, got {type(config).__name__}")
        super().__init__(policy, config, total_env_steps)

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        cfg = self.config
        obs, first = batch[C.OBS].transpose(0, 1), batch[C.FIRST].transpose(0, 1)  # [T + 1, B, ...]
        steps = obs.shape[0] - 1
        device = obs.device  # n-step returns are summed on the host (numpy), then sent where the batch is
        reward, terminated, truncated = (batch[k].T.cpu().numpy() for k in (C.REWARD, C.TERMINATED, C.TRUNCATED))
        ret, discount, next_t = (
            torch.from_numpy(x).to(device) for x in nstep_returns(reward, terminated, truncated, cfg.gamma, cfg.n_step)
        )
        q_all = self.policy.q_sequence(obs, batch[C.HIDDEN], first)  # [T + 1, B, A]
        rows = torch.arange(obs.shape[1], device=device)
        action = batch[C.ACTION].transpose(0, 1)[:steps].long() - self.action_start
        q = q_all[:steps].gather(-1, action.unsqueeze(-1)).squeeze(-1)  # [T, B]
        with torch.no_grad():
            q_target = self.target.q_sequence(obs, batch[C.HIDDEN], first)
            best = q_all.detach()[next_t, rows].argmax(-1, keepdim=True)  # double DQN: online picks
            target = ret + discount * q_target[next_t, rows].gather(-1, best).squeeze(-1)
        kept = slice(cfg.burn_in, steps)
        huber = torch.nn.functional.huber_loss(q[kept], target[kept], reduction="none", delta=cfg.huber_delta)
        loss = (batch[C.WEIGHT] * huber.mean(0)).mean()
        td = (target[kept] - q[kept].detach()).abs()
        stats = self._td_step(loss, q[kept], td)
        batch[C.PRIORITY].copy_(PRIORITY_MAX_WEIGHT * td.max(0).values + (1 - PRIORITY_MAX_WEIGHT) * td.mean(0))
        return stats


register_algorithm("r2d2", R2D2, R2D2Config)
