import math
import random

import pytest
import torch

from srl.algos.gae import compute_gae


def reference_gae(reward, value, terminated, truncated, gamma, lam):
    """Plain-Python GAE over nested lists [T + 1][B], one row and one step at a time."""
    steps, rows = len(value) - 1, len(value[0])
    advantage = [[0.0] * rows for _ in range(steps)]
    returns = [[0.0] * rows for _ in range(steps)]
    for b in range(rows):
        next_advantage = 0.0
        for t in reversed(range(steps)):
            if terminated[t][b]:
                target, continues = reward[t][b], False
            elif truncated[t][b]:  # bootstrap from the last observed state's value
                target, continues = reward[t][b] + gamma * value[t][b], False
            else:
                target, continues = reward[t][b] + gamma * value[t + 1][b], True
            delta = target - value[t][b]
            next_advantage = delta + (gamma * lam * next_advantage if continues else 0.0)
            advantage[t][b] = next_advantage
            returns[t][b] = next_advantage + value[t][b]
    return advantage, returns


def column(*xs, dtype=torch.float32):
    """A [T + 1, 1] tensor from one row's values."""
    return torch.tensor(xs, dtype=dtype).unsqueeze(1)


def run(reward, value, terminated, truncated, gamma, lam):
    adv, ret = compute_gae(
        column(*reward), column(*value), column(*terminated, dtype=torch.bool),
        column(*truncated, dtype=torch.bool), gamma, lam,
    )
    return adv.squeeze(1).tolist(), ret.squeeze(1).tolist()


def test_no_done_is_discounted_return_minus_value():
    # values 0 except the bootstrap value 4; lam = 1 -> Monte Carlo with bootstrap
    adv, ret = run([1, 2, 3, 0], [0, 0, 0, 4], [0, 0, 0, 0], [0, 0, 0, 0], gamma=0.5, lam=1.0)
    assert adv == pytest.approx([3.25, 4.5, 5.0])
    assert ret == pytest.approx([3.25, 4.5, 5.0])


def test_hand_checked_lambda():
    # delta = [1 + 1 - 1, 2 + 1.5 - 2, 3 + 2 - 3] = [1, 1.5, 2]; A_t = delta_t + 0.25 A_{t+1}
    adv, ret = run([1, 2, 3, 0], [1, 2, 3, 4], [0, 0, 0, 0], [0, 0, 0, 0], gamma=0.5, lam=0.5)
    assert adv == pytest.approx([1 + 0.25 * (1.5 + 0.25 * 2), 1.5 + 0.25 * 2, 2])
    assert ret == pytest.approx([a + v for a, v in zip(adv, [1, 2, 3])])


def test_terminated_cuts_trace_without_bootstrap():
    # t=1 terminated: delta_1 = 2 - 2 = 0; A_0 = (1 + 0.5 * 2 - 1) + 0.25 * 0 = 1
    adv, ret = run([1, 2, 3, 0], [1, 2, 3, 4], [0, 1, 0, 0], [0, 0, 0, 0], gamma=0.5, lam=0.5)
    assert adv == pytest.approx([1.0, 0.0, 2.0])
    assert ret == pytest.approx([2.0, 2.0, 5.0])


def test_truncated_bootstraps_from_last_observed_value_and_cuts_trace():
    # t=1 truncated: reward 2 + 0.5 * V(s_1) = 3, delta_1 = 3 - 2 = 1 (V(s_2) = 3 belongs to the
    # next episode and must not be used); A_0 = 1 + 0.25 * 1
    adv, ret = run([1, 2, 3, 0], [1, 2, 3, 4], [0, 0, 0, 0], [0, 1, 0, 0], gamma=0.5, lam=0.5)
    assert adv == pytest.approx([1.25, 1.0, 2.0])
    assert ret == pytest.approx([2.25, 3.0, 5.0])


def test_terminated_wins_over_truncated():
    adv, ret = run([1, 2, 3, 0], [1, 2, 3, 4], [0, 1, 0, 0], [0, 1, 0, 0], gamma=0.5, lam=0.5)
    assert adv == pytest.approx([1.0, 0.0, 2.0])
    assert ret == pytest.approx([2.0, 2.0, 5.0])


def test_last_row_of_reward_and_flags_is_ignored():
    nan = math.nan
    adv, ret = compute_gae(
        column(1, 2, 3, nan), column(1, 2, 3, 4), column(0, 0, 0, 1, dtype=torch.bool),
        column(0, 0, 0, 1, dtype=torch.bool), 0.5, 0.5,
    )
    assert adv.shape == (3, 1) and ret.shape == (3, 1)
    assert adv.squeeze(1).tolist() == pytest.approx([1.5, 2.0, 2.0])


@pytest.mark.parametrize("seed", range(5))
def test_matches_reference_on_random_data(seed):
    rng = random.Random(seed)
    steps, rows = rng.choice([1, 2, 17, 64]), rng.choice([1, 3, 8])
    gamma, lam = rng.uniform(0.8, 1.0), rng.uniform(0.0, 1.0)
    reward = [[rng.gauss(0, 1) for _ in range(rows)] for _ in range(steps + 1)]
    value = [[rng.gauss(0, 3) for _ in range(rows)] for _ in range(steps + 1)]
    terminated = [[rng.random() < 0.1 for _ in range(rows)] for _ in range(steps + 1)]
    truncated = [[rng.random() < 0.1 for _ in range(rows)] for _ in range(steps + 1)]

    adv, ret = compute_gae(
        torch.tensor(reward), torch.tensor(value), torch.tensor(terminated), torch.tensor(truncated),
        gamma, lam,
    )
    ref_adv, ref_ret = reference_gae(reward, value, terminated, truncated, gamma, lam)
    assert adv.shape == ret.shape == (steps, rows)
    torch.testing.assert_close(adv, torch.tensor(ref_adv), rtol=0, atol=1e-5)
    torch.testing.assert_close(ret, torch.tensor(ref_ret), rtol=0, atol=1e-5)


def test_inputs_are_not_modified():
    torch.manual_seed(0)
    reward, value = torch.randn(9, 4), torch.randn(9, 4)
    terminated, truncated = torch.rand(9, 4) < 0.2, torch.rand(9, 4) < 0.2
    copies = [x.clone() for x in (reward, value, terminated, truncated)]
    compute_gae(reward, value, terminated, truncated, 0.99, 0.95)
    for x, c in zip((reward, value, terminated, truncated), copies):
        assert torch.equal(x, c)


def test_rejects_segment_without_bootstrap_row():
    with pytest.raises(ValueError, match="T >= 1"):
        compute_gae(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), 0.9, 0.9)
