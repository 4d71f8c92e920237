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

import torch
from pydantic import Field

from srl.algos.actor_critic import ActorCritic, ActorCriticConfig, normalized
from srl.algos.ppo import STAT_NAMES as PPO_STATS
from srl.algos.vtrace import compute_vtrace
from srl.api.algorithm import AlgorithmConfig
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data.columns import ACTION, LOG_PROB, REWARD, TERMINATED, TRUNCATED, VALUE
from srl.spaces import map_obs, obs_columns, obs_of

STAT_NAMES = (*PPO_STATS, "losses/rho_clipfrac", "losses/explained_variance")  # PPO's, and V-trace's clip


class APPOConfig(ActorCriticConfig):
    """APPO / IMPALA hyperparameters. The defaults suit small classic-control tasks (CartPole)."""

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
    epochs: int = Field(1, ge=1, description="Passes over each batch (V-trace targets recomputed each pass).")
    num_minibatches: int = Field(
        1, ge=1, description="Minibatches per epoch, split by segment rows (each keeps whole segments)."
    )


class APPO(ActorCritic):
    """V-trace actor-critic; APPO with clip_ratio, IMPALA without. Owns an Adam optimizer."""

    config: APPOConfig

    def __init__(self, policy: Policy, config: APPOConfig, total_env_steps: int) -> None:
        if not isinstance(config, APPOConfig):
            raise TypeError(f"APPO needs an APPOConfig, got {type(config).__name__}")
        if LOG_PROB not in policy.rollout_fields():
            raise TypeError(f"APPO needs a policy whose rollout emits {LOG_PROB!r} (the behaviour policy's)")
        super().__init__(policy, config, total_env_steps)

    @classmethod
    def check_batch(cls, config: AlgorithmConfig, sample_length: int, rows: int) -> None:
        assert isinstance(config, APPOConfig)
        if config.num_minibatches > rows:
            raise ValueError(
                f"algo.num_minibatches ({config.num_minibatches}) exceeds the {rows} segment rows of a batch "
                "(APPO splits minibatches by rows, keeping whole segments)"
            )

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        """Updates on a [T + 1, B] batch; stats are means over its minibatch updates (STAT_NAMES),
        each measured before its gradient step, plus "charts/learning_rate"."""
        cfg = self.config
        lr = self._set_learning_rate(env_steps)
        device = self.params[0].device
        needed = (*obs_columns(batch), ACTION, REWARD, TERMINATED, TRUNCATED, LOG_PROB)  # obs: srl.spaces
        batch = {k: batch[k].to(device, non_blocking=True) for k in needed}
        steps, rows = batch[REWARD].shape[0] - 1, batch[REWARD].shape[1]
        self.check_batch(cfg, steps, rows)

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
        obs = map_obs(lambda x: x.flatten(0, 1), obs_of(batch))  # a tensor, or one per leaf (srl.spaces)
        out = self.policy.analyze(obs, batch[ACTION].flatten(0, 1))
        log_prob = out[LOG_PROB].view(steps + 1, rows)[:steps]
        value = out[VALUE].view(steps + 1, rows)
        log_ratio = log_prob - batch[LOG_PROB][:steps].float()
        targets = compute_vtrace(
            log_ratio, batch[REWARD], value, batch[TERMINATED], batch[TRUNCATED],
            cfg.gamma, cfg.rho_bar, cfg.c_bar, cfg.vtrace_lambda,
        )
        current = value[:steps]
        if cfg.clip_ratio is None:
            advantage = normalized(targets.pg_advantage, cfg.normalize_advantage)
            policy_loss = -(advantage * log_prob).mean()
        else:
            advantage = normalized(targets.q - current.detach(), cfg.normalize_advantage)
            ratio = log_ratio.exp()
            clipped = ratio.clamp(1.0 - cfg.clip_ratio, 1.0 + cfg.clip_ratio)
            policy_loss = torch.max(-advantage * ratio, -advantage * clipped).mean()
        value_loss = 0.5 * (current - targets.vs).square().mean()
        entropy = out["entropy"].view(steps + 1, rows)[:steps].mean()
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy

        self._optimize(loss)

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


class IMPALAConfig(APPOConfig):
    """APPO's hyperparameters with IMPALA's policy gradient (no clipped surrogate) by default."""

    clip_ratio: float | None = Field(
        None, gt=0, description="None = IMPALA's importance-weighted policy gradient; a float = APPO's clip."
    )


register_algorithm("appo", APPO, APPOConfig)
register_algorithm("impala", APPO, IMPALAConfig)
