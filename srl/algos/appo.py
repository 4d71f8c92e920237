"""IMPALA (Espeholt et al., 2018) and asynchronous PPO: V-trace targets for lagged samples.

Actors may act with parameters several versions older than the learner's. Each update runs the
learner's policy over the whole [T + 1, B] segments, then computes V-trace targets from the
importance ratios pi / mu, with mu's log-probabilities as stored in the samples (LOG_PROB):

    value loss  = 0.5 * (V(x_s) - v_s)^2
    IMPALA      (clip_ratio None): policy loss = -rho_s * (q_s - V(x_s)) * log pi(a_s|x_s)
    APPO        (clip_ratio set):  policy loss = clipped surrogate on ratio = pi / mu with the
                advantage q_s - V(x_s); the ratio already weights the sample, so the V-trace rho
                is not applied a second time
    loss = policy loss + value_coef * value loss - entropy_coef * entropy

with q_s = r_s + gamma * v_{s+1}. Staleness is corrected by V-trace (and the clip); segments
lagging more than the experiment's `max_policy_lag` are still dropped by the trainer. Minibatches
split the batch by segment rows, never in time: V-trace needs each row's whole segment.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field

from srl.algos.adam import Adam
from srl.algos.vtrace import compute_vtrace
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data.columns import ACTION, LOG_PROB, OBS, REWARD, TERMINATED, TRUNCATED, VALUE

STAT_NAMES = (
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/rho_clipfrac",
    "losses/explained_variance",
)


class APPOConfig(AlgorithmConfig):
    """APPO / IMPALA hyperparameters. The defaults suit small classic-control tasks (CartPole)."""

    lr: float = Field(1e-3, gt=0, description="Adam learning rate (the initial one if anneal_lr).")
    anneal_lr: bool = Field(True, description="Decay the learning rate linearly over anneal_env_steps.")
    anneal_env_steps: int | None = Field(
        None, gt=0, description="Env steps over which lr decays linearly to its floor; None = total_env_steps."
    )
    final_lr_fraction: float = Field(
        0.0, ge=0, le=1, description="The floor, as a fraction of lr, kept after anneal_env_steps (0 = decay to 0)."
    )
    gamma: float = Field(0.99, ge=0, le=1, description="Discount factor.")
    vtrace_lambda: float = Field(
        1.0, ge=0, le=1, description="Extra trace decay in V-trace's c_i = lambda * min(c_bar, pi/mu) (1 = IMPALA)."
    )
    rho_bar: float | None = Field(
        1.0, gt=0, description="Clip of the importance weight rho in V-trace's TD errors and advantages; None = no clip."
    )
    c_bar: float | None = Field(
        1.0, gt=0, description="Clip of the trace-cutting weight c in V-trace; None = no clip."
    )
    clip_ratio: float | None = Field(
        0.2,
        gt=0,
        description="PPO clipped surrogate: ratios pi/mu clipped to [1 - clip_ratio, 1 + clip_ratio] (APPO); "
        "None = IMPALA's plain importance-weighted policy gradient.",
    )
    value_coef: float = Field(0.5, ge=0, description="Weight of the value loss (0.5 * mean squared error).")
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus.")
    normalize_advantage: bool = Field(
        True, description="Normalize advantages to zero mean, unit std within each minibatch."
    )
    epochs: int = Field(1, ge=1, description="Passes over each batch (V-trace targets recomputed each pass).")
    num_minibatches: int = Field(
        1, ge=1, description="Minibatches per epoch, split by segment rows (each keeps whole segments)."
    )
    max_grad_norm: float | None = Field(
        0.5, gt=0, description="Clip the global gradient norm to this; None disables clipping."
    )
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")


class APPO(Algorithm):
    """V-trace actor-critic; APPO with clip_ratio, IMPALA without. Owns an Adam optimizer."""

    config: APPOConfig

    def __init__(self, policy: Policy, config: APPOConfig, total_env_steps: int) -> None:
        if not isinstance(config, APPOConfig):
            raise TypeError(f"APPO needs an APPOConfig, got {type(config).__name__}")
        if LOG_PROB not in policy.rollout_fields():
            raise TypeError(f"APPO needs a policy whose rollout emits {LOG_PROB!r} (the behaviour policy's)")
        if config.anneal_lr and total_env_steps <= 0:
            raise ValueError(f"anneal_lr needs total_env_steps > 0, got {total_env_steps}")
        super().__init__(policy, config, total_env_steps)
        self.params = [p for p in policy.parameters() if p.requires_grad]
        self.optimizer = Adam(self.params, lr=config.lr, eps=config.adam_eps)

    @classmethod
    def check_batch(cls, config: AlgorithmConfig, sample_length: int, rows: int) -> None:
        assert isinstance(config, APPOConfig)
        if config.num_minibatches > rows:
            raise ValueError(
                f"algo.num_minibatches ({config.num_minibatches}) exceeds the {rows} segment rows of a batch "
                "(APPO splits minibatches by rows, keeping whole segments)"
            )

    def learning_rate(self, env_steps: int) -> float:
        if not self.config.anneal_lr:
            return self.config.lr
        horizon = self.config.anneal_env_steps or self.total_env_steps
        floor = self.config.final_lr_fraction
        return self.config.lr * max(floor, 1.0 - (1.0 - floor) * env_steps / horizon)

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        """Updates on a [T + 1, B] batch; stats are means over its minibatch updates (STAT_NAMES),
        each measured before its gradient step, plus "charts/learning_rate"."""
        cfg = self.config
        lr = self.learning_rate(env_steps)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        device = self.params[0].device
        needed = (OBS, ACTION, REWARD, TERMINATED, TRUNCATED, LOG_PROB)
        batch = {k: batch[k].to(device, non_blocking=True) for k in needed}
        rows = batch[REWARD].shape[1]
        if cfg.num_minibatches > rows:
            raise ValueError(f"num_minibatches={cfg.num_minibatches} exceeds the batch's {rows} segment rows")

        totals = torch.zeros(len(STAT_NAMES), device=device)
        for _ in range(cfg.epochs):
            if cfg.num_minibatches == 1:
                totals += self._update(batch)
            else:
                for idx in torch.randperm(rows, device=device).tensor_split(cfg.num_minibatches):
                    totals += self._update({k: v[:, idx] for k, v in batch.items()})
        stats = dict(zip(STAT_NAMES, (totals / (cfg.epochs * cfg.num_minibatches)).tolist()))
        stats["charts/learning_rate"] = lr
        return stats

    def _update(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """One gradient step on whole segments [T + 1, b]; its stats, detached, in STAT_NAMES order."""
        cfg = self.config
        steps, rows = batch[REWARD].shape[0] - 1, batch[REWARD].shape[1]
        out = self.policy.analyze(batch[OBS].flatten(0, 1), batch[ACTION].flatten(0, 1))
        log_prob = out[LOG_PROB].view(steps + 1, rows)[:steps]
        value = out[VALUE].view(steps + 1, rows)
        log_ratio = log_prob - batch[LOG_PROB][:steps].float()
        targets = compute_vtrace(
            log_ratio, batch[REWARD], value, batch[TERMINATED], batch[TRUNCATED],
            cfg.gamma, cfg.rho_bar, cfg.c_bar, cfg.vtrace_lambda,
        )
        current = value[:steps]
        if cfg.clip_ratio is None:
            advantage = _normalized(targets.pg_advantage, cfg.normalize_advantage)
            policy_loss = -(advantage * log_prob).mean()
        else:
            advantage = _normalized(targets.q - current.detach(), cfg.normalize_advantage)
            ratio = log_ratio.exp()
            clipped = ratio.clamp(1.0 - cfg.clip_ratio, 1.0 + cfg.clip_ratio)
            policy_loss = torch.max(-advantage * ratio, -advantage * clipped).mean()
        value_loss = 0.5 * (current - targets.vs).square().mean()
        entropy = out["entropy"].view(steps + 1, rows)[:steps].mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm, foreach=True)
        self.optimizer.step()

        with torch.no_grad():
            ratio = log_ratio.exp()
            approx_kl = ((ratio - 1.0) - log_ratio).mean()  # KL(behaviour || learner), lag included
            clip = cfg.clip_ratio
            clipfrac = ((ratio - 1.0).abs() > clip).float().mean() if clip is not None else torch.zeros(())
            rho_clipfrac = (ratio > cfg.rho_bar).float().mean() if cfg.rho_bar is not None else torch.zeros(())
            variance = targets.vs.var()
            explained = 1.0 - (targets.vs - current).var() / variance if variance > 0 else torch.zeros(())
            stats = [policy_loss, value_loss, entropy, approx_kl, clipfrac, rho_clipfrac, explained]
            return torch.stack([s.float() for s in stats])

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


def _normalized(advantage: torch.Tensor, normalize: bool) -> torch.Tensor:
    if not normalize or advantage.numel() < 2:
        return advantage
    return (advantage - advantage.mean()) / (advantage.std() + 1e-8)


class IMPALAConfig(APPOConfig):
    """APPO's hyperparameters with IMPALA's policy gradient (no clipped surrogate) by default."""

    clip_ratio: float | None = Field(
        None, gt=0, description="None = IMPALA's importance-weighted policy gradient; a float = APPO's clip."
    )


register_algorithm("appo", APPO, APPOConfig)
register_algorithm("impala", APPO, IMPALAConfig)
