"""V-trace against a plain-Python explicit sum of its definition (Espeholt et al., 2018, eq. 1)."""

import math
import random

import pytest
import torch

from srl.algos.gae import compute_gae
from srl.algos.vtrace import compute_vtrace


def clip(x, bar):
    return x if bar is None else min(bar, x)


def reference_vtrace(log_rho, reward, value, terminated, truncated, gamma, rho_bar, c_bar, lam):
    """v_s = V(x_s) + sum_t gamma^(t-s) (prod_{i<t} c_i) delta_t, summed term by term, and
    A_s = rho_s (r_s + gamma v_{s+1} - V(x_s)); one row, one s at a time, nested lists [T + 1][B]."""
    steps, rows = len(value) - 1, len(value[0])
    vs = [[0.0] * rows for _ in range(steps)]
    adv = [[0.0] * rows for _ in range(steps)]
    for b in range(rows):

        def transition(t, b):
            """(reward, bootstrap value weight, ends) of t -> t + 1 with episode ends applied."""
            if terminated[t][b]:
                return reward[t][b], 0.0, True
            if truncated[t][b]:  # V(s_final) approximated by the last observed V(x_t)
                return reward[t][b] + gamma * value[t][b], 0.0, True
            return reward[t][b], gamma, False

        def delta(t, b):
            r, g, _ = transition(t, b)
            return clip(math.exp(log_rho[t][b]), rho_bar) * (r + g * value[t + 1][b] - value[t][b])

        for s in range(steps):
            total = value[s][b]
            for t in range(s, steps):
                product = 1.0
                for i in range(s, t):
                    product *= lam * clip(math.exp(log_rho[i][b]), c_bar)
                total += gamma ** (t - s) * product * delta(t, b)
                if transition(t, b)[2]:  # the episode ended: later steps belong to another one
                    break
            vs[s][b] = total
        for s in range(steps):
            r, g, _ = transition(s, b)
            next_vs = vs[s + 1][b] if s + 1 < steps else value[steps][b]
            adv[s][b] = clip(math.exp(log_rho[s][b]), rho_bar) * (r + g * next_vs - value[s][b])
    return vs, adv


def random_case(seed):
    rng = random.Random(seed)
    steps, rows = rng.choice([1, 2, 9, 33]), rng.choice([1, 3, 8])

    def table(f):
        return [[f() for _ in range(rows)] for _ in range(steps + 1)]

    return dict(
        log_rho=table(lambda: rng.gauss(0, 0.8)),  # ratios from ~0.1 to ~10: both clips active
        reward=table(lambda: rng.gauss(0, 1)),
        value=table(lambda: rng.gauss(0, 3)),
        terminated=table(lambda: rng.random() < 0.1),
        truncated=table(lambda: rng.random() < 0.1),
        gamma=rng.uniform(0.8, 1.0),
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bars", [(1.0, 1.0), (2.0, 0.5), (None, None), (0.7, 1.3)])
@pytest.mark.parametrize("lam", [1.0, 0.9])
def test_matches_explicit_sum_of_the_definition(seed, bars, lam):
    case = random_case(seed)
    rho_bar, c_bar = bars
    out = compute_vtrace(
        torch.tensor(case["log_rho"]), torch.tensor(case["reward"]), torch.tensor(case["value"]),
        torch.tensor(case["terminated"]), torch.tensor(case["truncated"]), case["gamma"], rho_bar, c_bar, lam,
    )
    ref_vs, ref_adv = reference_vtrace(**case, rho_bar=rho_bar, c_bar=c_bar, lam=lam)
    steps = len(case["value"]) - 1
    assert out.vs.shape == out.pg_advantage.shape == (steps, len(case["value"][0]))
    torch.testing.assert_close(out.vs, torch.tensor(ref_vs), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(out.pg_advantage, torch.tensor(ref_adv), rtol=1e-5, atol=1e-4)


def test_clipping_changes_the_result():
    """The reference cases exercise clipping: unclipped and clipped targets differ."""
    case = random_case(3)
    args = [torch.tensor(case[k]) for k in ("log_rho", "reward", "value", "terminated", "truncated")]
    clipped = compute_vtrace(*args, case["gamma"], 1.0, 1.0)
    free = compute_vtrace(*args, case["gamma"], None, None)
    assert not torch.allclose(clipped.vs, free.vs)


def test_on_policy_equals_gae_lambda_return():
    """pi = mu: v_s is the lambda-return, i.e. GAE's value target with the same lambda."""
    torch.manual_seed(0)
    reward, value = torch.randn(17, 5), torch.randn(17, 5)
    terminated, truncated = torch.rand(17, 5) < 0.1, torch.rand(17, 5) < 0.1
    out = compute_vtrace(torch.zeros(17, 5), reward, value, terminated, truncated, 0.97, 1.0, 1.0, lam=0.9)
    _, returns = compute_gae(reward, value, terminated, truncated, 0.97, 0.9)
    torch.testing.assert_close(out.vs, returns, rtol=0, atol=1e-5)
    assert torch.equal(out.rho, torch.ones(16, 5))


def test_hand_checked_episode_end_inside_segment():
    # T = 3, gamma = 0.5, all ratios 2 clipped to rho_bar = c_bar = 1; terminated on t = 1.
    # delta = [1 + 0.5*2 - 1, 2 - 2, 3 + 0.5*4 - 3] = [1, 0, 2]; the trace is cut after t = 1:
    # vs = [1 + 1 + 0.5 * 0, 2 + 0, 3 + 2] = [2, 2, 5]; A = [1 + 0.5*2 - 1, 2 - 2, 3 + 0.5*4 - 3]

    def col(*xs, dtype=torch.float32):
        return torch.tensor(xs, dtype=dtype).unsqueeze(1)

    out = compute_vtrace(
        col(*[math.log(2)] * 4), col(1, 2, 3, 0), col(1, 2, 3, 4),
        col(0, 1, 0, 0, dtype=torch.bool), col(0, 0, 0, 0, dtype=torch.bool), 0.5,
    )
    assert out.vs.squeeze(1).tolist() == pytest.approx([2.0, 2.0, 5.0])
    assert out.pg_advantage.squeeze(1).tolist() == pytest.approx([1.0, 0.0, 2.0])


def test_no_gradient_and_inputs_unchanged():
    value = torch.randn(5, 2, requires_grad=True)
    log_rho = torch.randn(4, 2, requires_grad=True)
    reward = torch.randn(5, 2)
    flags = torch.zeros(5, 2, dtype=torch.bool)
    before = reward.clone()
    out = compute_vtrace(log_rho, reward, value, flags, flags, 0.9)
    assert not out.vs.requires_grad and not out.pg_advantage.requires_grad
    assert torch.equal(reward, before)


def test_bad_shapes_and_bars_are_rejected():
    z = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="T >= 1"):
        compute_vtrace(z[:1], z[:1], z[:1], z[:1], z[:1], 0.9)
    with pytest.raises(ValueError, match="log_rho has 2 rows"):
        compute_vtrace(z[:2], z, z, z, z, 0.9)
    with pytest.raises(ValueError, match="rho_bar and c_bar"):
        compute_vtrace(z, z, z, z, z, 0.9, rho_bar=0.0)
