"""ValueNorm against a plain reference loop, and PPO using it: GAE in reward units, the critic's
targets normalized, the statistics checkpointed."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from test_ppo import OBS_SPACE, make_batch

from srl.algos import PPO, PPOConfig
from srl.algos.value_norm import VAR_FLOOR, ValueNorm
from srl.data import columns as C
from srl.models import ActorCriticMLP


def reference_mean_std(batches: list[torch.Tensor], beta: float) -> tuple[float, float]:
    """Debiased exponential moving averages of the batch mean and mean square, written out."""
    mean = mean_sq = weight = 0.0
    for batch in batches:
        values = [float(v) for v in batch.flatten()]
        mean = beta * mean + (1 - beta) * sum(values) / len(values)
        mean_sq = beta * mean_sq + (1 - beta) * sum(v * v for v in values) / len(values)
        weight = beta * weight + (1 - beta)
    mu = mean / weight
    return mu, max(mean_sq / weight - mu * mu, VAR_FLOOR) ** 0.5


def test_statistics_match_the_reference_and_normalize_inverts():
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(16, 8, generator=g) * 30.0 - 120.0 + 5.0 * i for i in range(12)]
    norm = ValueNorm(beta=0.9)
    assert norm.mean_std() == (0.0, 1.0)  # before any target: the identity
    for batch in batches:
        norm.update(batch)
    mean, std = norm.mean_std()
    ref_mean, ref_std = reference_mean_std(batches, 0.9)
    assert (mean, std) == pytest.approx((ref_mean, ref_std), rel=1e-9)
    x = torch.randn(50, generator=g, dtype=torch.float64) * 40.0
    assert torch.allclose(norm.denormalize(norm.normalize(x)), x)
    assert float(norm.normalize(torch.tensor(ref_mean, dtype=torch.float64))) == pytest.approx(0.0, abs=1e-9)


def test_with_beta_near_one_it_is_the_mean_of_all_targets_and_a_constant_target_keeps_the_floor():
    norm = ValueNorm()
    for value in (10.0, 20.0, 30.0):
        norm.update(torch.full((4,), value))
    mean, std = norm.mean_std()
    assert mean == pytest.approx(20.0, rel=1e-4) and std == pytest.approx((200.0 / 3) ** 0.5, rel=1e-3)
    flat = ValueNorm()
    flat.update(torch.full((4,), 7.0))
    assert flat.mean_std() == pytest.approx((7.0, VAR_FLOOR**0.5))


def test_ppo_runs_gae_on_reward_units_and_trains_the_critic_on_normalized_targets(monkeypatch):
    import srl.algos.ppo as ppo_module

    torch.manual_seed(0)
    policy = ActorCriticMLP(OBS_SPACE, gym.spaces.Discrete(2))
    batch = make_batch(policy)
    batch[C.REWARD] = batch[C.REWARD] * 50.0 + 300.0  # returns far from the critic's initial scale
    ppo = PPO(policy, PPOConfig(value_norm=True, epochs=1, anneal_lr=False), total_env_steps=1000)
    ppo.value_norm.update(torch.tensor([1000.0, 3000.0]))  # mean 2000, std 1000
    stored = batch[C.VALUE].clone()

    seen = {}
    real_gae = ppo_module.compute_gae

    def spy_gae(reward, value, *rest):
        seen["value"] = value.clone()
        advantage, returns = real_gae(reward, value, *rest)
        seen["returns"] = returns.clone()
        return advantage, returns

    monkeypatch.setattr(ppo_module, "compute_gae", spy_gae)
    losses = []
    real_loss = ppo.apply_loss
    monkeypatch.setattr(ppo, "apply_loss", lambda out, lp, v, adv, ret, *a: losses.append(ret) or real_loss(out, lp, v, adv, ret, *a))
    ppo.step(batch, env_steps=0)

    assert torch.allclose(seen["value"], stored * 1000.0 + 2000.0, rtol=1e-6)  # back in reward units
    mean, std = ppo.value_norm.mean_std()  # now folds this batch's returns in
    target = (seen["returns"].flatten() - mean) / std
    assert torch.allclose(losses[0].double(), target.double(), rtol=1e-5, atol=1e-6)


def test_value_norm_statistics_are_checkpointed_and_a_plain_checkpoint_is_refused():
    policy = ActorCriticMLP(OBS_SPACE, gym.spaces.Discrete(2))
    trained = PPO(policy, PPOConfig(value_norm=True), total_env_steps=1000)
    trained.value_norm.update(torch.tensor([3.0, 5.0]))
    resumed = PPO(policy, PPOConfig(value_norm=True), total_env_steps=1000)
    resumed.load_state_dict(trained.state_dict())
    assert resumed.value_norm.mean_std() == trained.value_norm.mean_std()
    plain = PPO(policy, PPOConfig(), total_env_steps=1000).state_dict()
    with pytest.raises(ValueError, match="value_norm"):
        resumed.load_state_dict(plain)
