"""SAC pieces without processes: the squashed Gaussian's log-probabilities and one update."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl.algos.sac import SAC, SACConfig
from srl.data import columns as C
from srl.models.squashed_gaussian import SquashedGaussianMLP

OBS = gym.spaces.Box(-1, 1, (3,))
ACT = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def test_sampled_actions_lie_in_bounds_and_log_probs_agree_with_analyze():
    torch.manual_seed(0)
    policy = SquashedGaussianMLP(OBS, ACT, hidden_sizes=(16,))
    obs = torch.randn(256, 3)
    action, log_prob = policy.sample(obs)
    assert (action[:, 0].abs() <= 2).all() and ((action[:, 1] >= 0) & (action[:, 1] <= 1)).all()
    torch.testing.assert_close(policy.analyze(obs, action.detach())["log_prob"], log_prob, rtol=1e-3, atol=1e-3)
    greedy = policy.rollout(obs[:4], deterministic=True)["action"]
    assert greedy.shape == (4, 2) and torch.equal(greedy, policy.rollout(obs[:4], deterministic=True)["action"])


def test_squashed_density_integrates_to_one():
    """Monte Carlo check of the tanh + rescaling correction on a 1-D action in [-2, 2]."""
    torch.manual_seed(1)
    policy = SquashedGaussianMLP(OBS, gym.spaces.Box(-2.0, 2.0, (1,)), hidden_sizes=(4,))
    obs = torch.zeros(1, 3)
    grid = torch.linspace(-2 + 1e-4, 2 - 1e-4, 20001).unsqueeze(1)
    density = policy.analyze(obs.expand(len(grid), 3), grid)["log_prob"].exp()
    assert torch.trapezoid(density, grid[:, 0]).item() == pytest.approx(1.0, abs=1e-2)


def test_sac_update_moves_critics_toward_the_target_and_writes_priorities():
    torch.manual_seed(2)
    policy = SquashedGaussianMLP(OBS, ACT, hidden_sizes=(16,))
    sac = SAC(policy, SACConfig(critic_lr=1e-2, critic_hidden_sizes=[16]), 0)
    n = 64
    batch = {C.OBS: torch.randn(n, 3), C.ACTION: torch.rand(n, 2), C.REWARD: torch.ones(n),
             C.DISCOUNT: torch.zeros(n), C.NEXT_OBS: torch.randn(n, 3), C.WEIGHT: torch.ones(n),
             C.PRIORITY: torch.zeros(n)}
    first = sac.step(batch, 0)["losses/critic_loss"]
    for _ in range(100):
        stats = sac.step(batch, 0)
    assert stats["losses/critic_loss"] < 0.1 * first  # with discount 0 the target is the reward
    assert (batch[C.PRIORITY] > 0).all() and batch[C.PRIORITY].max() < 0.5
    assert stats["losses/alpha"] < 1.0  # entropy above target at init: alpha decreases
    restored = SAC(SquashedGaussianMLP(OBS, ACT, hidden_sizes=(16,)), SACConfig(critic_hidden_sizes=[16]), 0)
    restored.load_state_dict(sac.state_dict())
    assert torch.equal(restored.log_alpha, sac.log_alpha)


def test_normalize_obs_keeps_running_moments_that_travel_with_the_weights_and_feed_the_critics():
    """normalize_obs: the running mean and variance merged batch by batch equal those of all the
    observations at once; they are buffers (in state_dict: the parameter stream and checkpoints
    carry them); SAC's step folds each batch in, and actor and critics read the standardized view."""
    from srl.models.squashed_gaussian import ObsNormalizer

    rng = np.random.default_rng(4)
    data = rng.normal([1.3, 0.75, -4.0], [0.01, 0.2, 3.0], (300, 3)).astype(np.float32)
    norm = ObsNormalizer(3)
    for chunk in np.array_split(data, 7):
        norm.update(torch.from_numpy(chunk))
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-4)
    standardized = norm(torch.from_numpy(data)).numpy()
    np.testing.assert_allclose(standardized.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(standardized.std(0), 1.0, atol=1e-3)

    torch.manual_seed(2)
    policy = SquashedGaussianMLP(OBS, ACT, hidden_sizes=(16,), normalize_obs=True)
    assert {"normalizer.mean", "normalizer.var", "normalizer.count"} <= set(policy.state_dict())
    sac = SAC(policy, SACConfig(critic_hidden_sizes=[16]), 0)
    n = 64
    obs = torch.from_numpy(data[:n])
    batch = {C.OBS: obs, C.ACTION: torch.rand(n, 2), C.REWARD: torch.ones(n), C.DISCOUNT: torch.zeros(n),
             C.NEXT_OBS: obs, C.WEIGHT: torch.ones(n), C.PRIORITY: torch.zeros(n)}
    seen = []
    critic_forward = sac.critic.forward
    sac.critic.forward = lambda o, a: (seen.append(o), critic_forward(o, a))[1]  # type: ignore[method-assign]
    sac.step(batch, 0)
    assert float(policy.normalizer.count) == n
    np.testing.assert_allclose(policy.normalizer.mean.numpy(), data[:n].mean(0), rtol=1e-5, atol=1e-6)
    assert all(np.abs(o.mean(0).numpy()).max() < 1e-3 for o in seen)  # the critics read the standardized view
    copy = SquashedGaussianMLP(OBS, ACT, hidden_sizes=(16,), normalize_obs=True)
    copy.load_state_dict(policy.state_dict())
    assert torch.equal(copy.rollout(obs, deterministic=True)["action"], policy.rollout(obs, deterministic=True)["action"])
    with pytest.raises(ValueError, match="normalize_obs"):
        SquashedGaussianMLP(gym.spaces.Dict({"a": OBS}), ACT, normalize_obs=True)
