"""The tabular Q-learning of benchmarks/lf_qlearning.py: the kernel against a hand computation,
and srl's algorithm applying exactly the kernel's rule in lock-step order (both sides of the
benchmark must learn the same way)."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _lfq_tabular as T  # noqa: E402

from srl.data import columns as C  # noqa: E402


def test_q_update_applies_transitions_in_order():
    q = np.ones((3, 2))
    T.q_update(q, [(0, 1, 0.0, 1, False), (1, 0, 1.0, 2, True), (0, 1, 0.0, 1, False)], alpha=0.5, gamma=0.9)
    # 1st: q[0,1] = 1 + .5 (.9 * 1 - 1) = .95; 2nd: q[1,0] = 1 + .5 (1 - 1) = 1 (done: no bootstrap)
    # 3rd: q[0,1] = .95 + .5 (.9 * max(q[1]) - .95) = .95 + .5 (.9 - .95) = .925
    assert q[0, 1] == pytest.approx(0.925) and q[1, 0] == 1.0 and q[2].tolist() == [1.0, 1.0]


def test_srl_algorithm_matches_the_kernel_on_a_lock_step_batch():
    spaces = gym.spaces.Discrete(6), gym.spaces.Discrete(4)
    policy = T.QTable(*spaces)
    algo = T.TabularQ(policy, T.TabularQConfig(), total_env_steps=100)
    rng = np.random.default_rng(0)
    steps, workers = 3, 4
    obs = rng.integers(0, 6, (steps + 1, workers))
    action = rng.integers(0, 4, (steps + 1, workers))
    reward = rng.random((steps + 1, workers))
    terminated = rng.random((steps + 1, workers)) < 0.3
    batch = {C.OBS: torch.as_tensor(obs), C.ACTION: torch.as_tensor(action), C.REWARD: torch.as_tensor(reward),
             C.TERMINATED: torch.as_tensor(terminated), C.TRUNCATED: torch.zeros(steps + 1, workers, dtype=torch.bool)}
    for _ in range(3):
        algo.step(batch, env_steps=0)
    expected = np.full((6, 4), T.Q_INIT)
    transitions = [(obs[t, b], action[t, b], reward[t, b], obs[t + 1, b], terminated[t, b])
                   for t in range(steps) for b in range(workers)]
    for _ in range(3):
        T.q_update(expected, transitions, T.ALPHA, T.GAMMA)
    np.testing.assert_allclose(policy.q.detach().numpy(), expected)


def test_q_table_acts_greedily_with_random_ties_and_explores_at_epsilon():
    policy = T.QTable(gym.spaces.Discrete(2), gym.spaces.Discrete(3), epsilon=0.0)
    with torch.no_grad():
        policy.q[0] = torch.tensor([0.0, 2.0, 1.0])
    torch.manual_seed(0)
    assert set(policy.rollout(torch.zeros(50, dtype=torch.int64))["action"].tolist()) == {1}
    assert set(policy.rollout(torch.ones(200, dtype=torch.int64))["action"].tolist()) == {0, 1, 2}  # all tied
    policy.epsilon = 1.0
    assert len(set(policy.rollout(torch.zeros(200, dtype=torch.int64))["action"].tolist())) == 3
