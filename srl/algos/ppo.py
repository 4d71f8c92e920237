"""Proximal Policy Optimization (Schulman et al., 2017) with GAE, for actor-critic policies.

One `step` = GAE on the batch with the behaviour policy's stored values, then `epochs` passes
over the T * B transitions in `num_minibatches` shuffled minibatches, each an Adam step on

    loss = clipped surrogate + value_coef * (clipped) value loss - entropy_coef * entropy

The policy must implement `analyze(obs, action) -> {"log_prob", "entropy", "value"}` and emit
"log_prob" and "value" from `rollout` (e.g. srl.models.ActorCriticMLP); `obs` is a dict leaf path ->
tensor for Dict and Tuple observations (srl.spaces), minibatched leaf by leaf. Samples may come from
older parameter versions than the one being trained; the stored log_prob is the behaviour
policy's, so the importance ratio and its clipping account for that staleness.

Multi-agent rows (MAPPO, srl.models.mappo) need nothing more: every row is one agent, so the loss
is PPO's per agent. When the batch has an "active" column (turn-based games), GAE credits the
rewards of waiting steps to the agent's last action, and the policy loss, entropy, advantage
normalization and the KL / clip statistics use the acting rows only; the value loss uses all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import torch
from pydantic import Field

from srl.algos.actor_critic import ActorCritic, ActorCriticConfig, explained_variance_tensor, normalized
from srl.algos.gae import compute_gae
from srl.algos.ppo_recurrent import recurrent_epochs
from srl.algos.value_norm import ValueNorm
from srl.api.algorithm import AlgorithmConfig
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data.columns import (
    ACTION,
    ACTIVE,
    FIRST,
    HIDDEN,
    LOG_PROB,
    REWARD,
    TERMINATED,
    TRUNCATED,
    VALUE,
)
from srl.spaces import map_obs, obs_columns, obs_of

STAT_NAMES = (
    "losses/policy_loss",
    "losses/value_loss",
    "losses/entropy",
    "losses/approx_kl",
    "losses/clipfrac",
)


class PPOConfig(ActorCriticConfig):
    """PPO hyperparameters. The defaults suit small classic-control tasks (CartPole)."""

    gamma: float = Field(0.98, ge=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.8, ge=0, le=1, description="GAE lambda: 0 = one-step TD, 1 = Monte Carlo.")
    clip_coef: float = Field(
        0.2, gt=0, description="Probability ratios are clipped to [1 - clip_coef, 1 + clip_coef]."
    )
    clip_value: bool = Field(
        False,
        description="Clip the value prediction to within value_clip_coef of the stored behaviour "
        "value and take the larger of the clipped and unclipped squared errors (pong-ppo does; the "
        "other built-ins learn faster without).",
    )
    value_clip_coef: float = Field(
        0.2,
        gt=0,
        description="Half-width of the value clipping range, in return units (not relative, so "
        "scale it with the rewards); used only if clip_value.",
    )
    epochs: int = Field(
        10,
        ge=1,
        description="Passes over each batch. With num_minibatches=1 this is the number of full-batch "
        "gradient steps per batch: more passes squeeze more out of each sample, but the clipped "
        "objective stops most of the gain once ratios leave [1 - clip, 1 + clip], and stale data "
        "grows; 10 is the common middle. Small batches on easy tasks (CartPole, 256 transitions "
        "per batch) reach the 500 cap faster with 20.",
    )
    num_minibatches: int = Field(1, ge=1, description="Shuffled minibatches per epoch (T * B split evenly).")
    value_norm: bool = Field(
        False,
        description="Train the critic on normalized targets (running mean / std of all targets seen; the "
        "MAPPO paper's ValueNorm, srl.algos.value_norm); GAE maps the stored values back to reward units, and "
        "value_clip_coef is then in normalized units.",
    )
    burn_in: int = Field(
        0,
        ge=0,
        description="Recurrent policies: the first burn_in steps of each segment only warm up the state "
        "re-run from the stored one and carry no loss (R2D2's burn-in); must be < sample_length. "
        "Minibatches then split a batch's segment rows, not its transitions.",
    )


# An update whose mean clipfrac or approx_kl is past these has moved the policy far from the one
# that acted: common updates sit near clipfrac 0.1-0.2 and KL 0.01-0.02 (SB3's target_kl advice is
# 0.01-0.05). Issue 37's new env gave 0.60 and 0.043 on its first updates with lr 1e-3, 10 epochs
# and one minibatch, and learned little; nothing said so.
RUNAWAY_CLIPFRAC, RUNAWAY_KL = 0.3, 0.03


def warn_if_runaway(cfg: PPOConfig, stats: dict[str, float], update: int) -> bool:
    """Print one console line when an update's clipfrac or approx_kl runs away, with the numbers
    and the knobs to turn; whether it did."""
    clipfrac, kl = stats.get("losses/clipfrac", 0.0), stats.get("losses/approx_kl", 0.0)
    if not (clipfrac > RUNAWAY_CLIPFRAC or kl > RUNAWAY_KL):  # (a NaN is the non-finite guard's business)
        return False
    print(f"srl: warning: PPO update {update}: clipfrac {clipfrac:.2f}, approx_kl {kl:.3f} (above "
          f"{RUNAWAY_CLIPFRAC} or {RUNAWAY_KL}): each update moves the policy far from the one that acted, which "
          f"often stalls learning; lower algo.lr (now {cfg.lr:g}) or algo.epochs (now {cfg.epochs}), or raise "
          f"algo.num_minibatches (now {cfg.num_minibatches}); shown once", file=sys.stderr, flush=True)
    return True


class PPO(ActorCritic):
    """Clipped-surrogate PPO; owns an Adam optimizer over the policy's parameters."""

    config: PPOConfig
    trains_recurrent = True  # policies with analyze_sequence: see srl.algos.ppo_recurrent

    def __init__(self, policy: Policy, config: PPOConfig, total_env_steps: int) -> None:
        if not isinstance(config, PPOConfig):
            raise TypeError(f"PPO needs a PPOConfig, got {type(config).__name__}")
        missing = {LOG_PROB, VALUE} - set(policy.rollout_fields())
        if missing:
            raise TypeError(f"PPO needs a policy whose rollout emits {sorted(missing)} (an actor-critic)")
        super().__init__(policy, config, total_env_steps)
        self.value_norm = ValueNorm() if config.value_norm else None
        self.updates_made = 0  # by this process (the warning's update number)
        self.warned_runaway = False  # warn_if_runaway: once per process

    @classmethod
    def check_batch(cls, config: AlgorithmConfig, sample_length: int, rows: int) -> None:
        assert isinstance(config, PPOConfig)
        if config.num_minibatches > sample_length * rows:
            raise ValueError(
                f"algo.num_minibatches ({config.num_minibatches}) exceeds the {sample_length * rows} "
                "transitions of a batch"
            )

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        """One PPO update on a [T + 1, B] batch (columns of srl.data.columns).

        Stats: "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl" and
        "losses/clipfrac" are means over all minibatch updates of this step, each measured before
        its gradient step; "charts/learning_rate" is the rate used; "losses/explained_variance"
        compares the stored values with the GAE returns (nan when the returns are constant).
        The stats of `device_step`, read to the host in one copy.
        """
        on_device = self.device_step(batch, env_steps)
        stats = dict(zip(on_device, torch.stack(list(on_device.values())).tolist()))
        stats["charts/learning_rate"] = float(self.learning_rate(env_steps))  # exact (not rounded to float32)
        self.observe_stats(stats)
        return stats

    def observe_stats(self, stats: dict[str, float]) -> None:
        """An update's stats on the host: the runaway warning (once per process)."""
        self.updates_made += 1
        if not self.warned_runaway:
            self.warned_runaway = warn_if_runaway(self.config, stats, self.updates_made)

    def device_step(self, batch: dict[str, torch.Tensor], env_steps: int | torch.Tensor) -> dict[str, torch.Tensor]:
        """`step` with its stats left on the device (0-dim float32 tensors): nothing is read back
        to the host, so a pod's update neither waits for the device nor stops a CUDA graph's
        capture (srl.workers.pod). `env_steps` may be a device tensor (the schedule is then
        computed on the device, and Adam takes the rate as a tensor)."""
        cfg = self.config
        lr = self._set_learning_rate(env_steps)
        device = self.params[0].device
        recurrent = self.policy.recurrent
        # the observation's columns: "obs", or one per leaf of a Dict/Tuple space (srl.spaces)
        needed = (*obs_columns(batch), ACTION, REWARD, TERMINATED, TRUNCATED, LOG_PROB, VALUE)
        needed += (FIRST, HIDDEN) if recurrent else ()
        needed += (ACTIVE,) if ACTIVE in batch else ()
        batch = {k: batch[k].to(device, non_blocking=True) for k in needed}
        active = batch.get(ACTIVE)
        with torch.no_grad():
            values = batch[VALUE] if self.value_norm is None else self.value_norm.denormalize(batch[VALUE].float())
            advantage, returns = compute_gae(
                batch[REWARD], values, batch[TERMINATED], batch[TRUNCATED], cfg.gamma, cfg.gae_lambda, active
            )
            if self.value_norm is not None:  # the critic's targets, in the units of its stored values
                self.value_norm.update(returns)
                returns = self.value_norm.normalize(returns)
        if recurrent:  # through time, segment rows as minibatches (srl.algos.ppo_recurrent)
            means, explained = recurrent_epochs(
                self.policy, self.apply_loss, batch, advantage, returns, cfg.epochs, cfg.num_minibatches, cfg.burn_in
            )
            explained_t = torch.as_tensor(explained, dtype=torch.float32, device=device)
        else:
            means, explained_t = self._epochs(batch, advantage, returns)
        stats = dict(zip(STAT_NAMES, means.unbind()))
        stats["charts/learning_rate"] = torch.as_tensor(lr, dtype=torch.float32, device=device)
        stats["losses/explained_variance"] = explained_t
        return stats

    def _epochs(
        self, batch: dict[str, torch.Tensor], advantage: torch.Tensor, returns: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`epochs` passes over the T * B transitions, one `apply_loss` per minibatch: the mean of
        its stats, and the explained variance of the stored values (both on the device).

        On CUDA a minibatch permutation is the argsort of uniform draws from the default
        generator (which a CUDA graph registers), not `randperm`: same distribution, capturable."""
        cfg = self.config
        steps = advantage.shape[0]  # T; row T only served to bootstrap
        self.check_batch(cfg, *advantage.shape)

        def flat(x: torch.Tensor) -> torch.Tensor:  # [T + 1, B, ...] -> [T * B, ...]
            return x[:steps].flatten(0, 1)

        data: tuple[Any, ...] = (
            map_obs(flat, obs_of(batch)),  # a tensor, or a dict leaf path -> tensor
            flat(batch[ACTION]),
            flat(batch[LOG_PROB]).float(),
            flat(batch[VALUE]).float(),
            advantage.flatten(),
            returns.flatten(),
        )
        if ACTIVE in batch:
            data += (flat(batch[ACTIVE]).float(),)
        totals = torch.zeros(len(STAT_NAMES), device=advantage.device)
        for _ in range(cfg.epochs):
            if cfg.num_minibatches == 1:
                totals += self._update(*data)
            else:
                for idx in _permutation(advantage.numel(), advantage.device).tensor_split(cfg.num_minibatches):
                    totals += self._update(*(map_obs(itemgetter(idx), x) for x in data))
        return totals / (cfg.epochs * cfg.num_minibatches), explained_variance_tensor(data[3], data[5])

    def _update(self, obs: torch.Tensor | dict[str, torch.Tensor], action: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        """One gradient step on a minibatch (the rest of `apply_loss`'s arguments); its stats."""
        return self.apply_loss(self.policy.analyze(obs, action), *rest)

    def apply_loss(
        self,
        out: dict[str, torch.Tensor],
        old_log_prob: torch.Tensor,
        old_value: torch.Tensor,
        advantage: torch.Tensor,
        returns: torch.Tensor,
        active: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One gradient step on the loss of the policy's view `out` of a minibatch (flat rows).
        `active` (0/1 per row) restricts the policy terms to the rows whose agent acted."""
        cfg = self.config
        log_ratio = out[LOG_PROB] - old_log_prob
        ratio = log_ratio.exp()

        mean = torch.mean if active is None else _masked_mean(active)
        if active is None:
            advantage = normalized(advantage, cfg.normalize_advantage)
        elif cfg.normalize_advantage:
            centred = advantage - mean(advantage)
            advantage = centred / (mean(centred.square()).sqrt() + 1e-8)
        clipped_ratio = ratio.clamp(1.0 - cfg.clip_coef, 1.0 + cfg.clip_coef)
        policy_loss = mean(torch.max(-advantage * ratio, -advantage * clipped_ratio))

        value = out[VALUE]
        value_error = (value - returns).square()
        if cfg.clip_value:
            clipped = old_value + (value - old_value).clamp(-cfg.value_clip_coef, cfg.value_clip_coef)
            value_error = torch.max(value_error, (clipped - returns).square())
        value_loss = 0.5 * value_error.mean()

        entropy = mean(out["entropy"])
        loss = policy_loss + cfg.value_coef * value_loss - cfg.entropy_coef * entropy

        self._optimize(loss)

        with torch.no_grad():
            approx_kl = mean((ratio - 1.0) - log_ratio)  # unbiased, low-variance KL(old || new)
            clipfrac = mean(((ratio - 1.0).abs() > cfg.clip_coef).float())
            return torch.stack([policy_loss, value_loss, entropy, approx_kl, clipfrac])

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        if self.value_norm is not None:
            state["value_norm"] = self.value_norm.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if self.value_norm is not None:
            if "value_norm" not in state:
                raise ValueError("this checkpoint was trained without algo.value_norm; resume it with value_norm=false")
            self.value_norm.load_state_dict(state["value_norm"])


def _permutation(n: int, device: torch.device) -> torch.Tensor:
    """A random permutation of 0..n-1: `randperm` on the CPU (as before: same draws), the argsort
    of n uniform draws on CUDA (no host sync, capturable in a CUDA graph)."""
    if device.type == "cuda":
        return torch.rand(n, device=device).argsort()
    return torch.randperm(n, device=device)


def _masked_mean(weight: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """mean over the rows where weight is 1 (0 when there are none)."""
    count = weight.sum().clamp(min=1.0)
    return lambda x: (x * weight).sum() / count


register_algorithm("ppo", PPO, PPOConfig)
