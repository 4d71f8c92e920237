"""Replay kernels against plain reference loops: sum tree, n-step returns, replay memory."""

from __future__ import annotations

import numpy as np
import pytest

from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.nstep import nstep_returns
from srl.data.replay import ReplayMemory, batch_fields, segment_transitions, transition_fields
from srl.data.sumtree import SumTree


@pytest.mark.parametrize("capacity", [1, 5, 8, 100])
def test_sumtree_matches_cumsum_search(capacity):
    rng = np.random.default_rng(capacity)
    tree, ref = SumTree(capacity), np.zeros(capacity)
    for _ in range(20):
        index = rng.integers(0, capacity, 7)
        value = rng.random(7) * (rng.random(7) > 0.3)  # some zeros: never found
        tree.update(index, value)
        for i, v in zip(index, value):  # a repeated index keeps its last value
            ref[i] = v
        assert tree.total == pytest.approx(ref.sum())
        if ref.sum() == 0:
            continue
        prefix = rng.random(50) * ref.sum()
        expected = [int(np.searchsorted(np.cumsum(ref), u, side="right")) for u in prefix]
        np.testing.assert_array_equal(tree.find(prefix), np.minimum(expected, capacity - 1))
        assert (ref[tree.find(prefix)] > 0).all()


def test_sumtree_rejects_bad_input():
    tree = SumTree(4)
    with pytest.raises(IndexError):
        tree.update(np.array([4]), np.array([1.0]))
    with pytest.raises(ValueError, match="finite"):
        tree.update(np.array([0]), np.array([np.nan]))


def nstep_reference(reward, terminated, truncated, gamma, n):
    T, rows = reward.shape[0] - 1, reward.shape[1]
    ret, disc, nxt = np.zeros((T, rows)), np.zeros((T, rows)), np.zeros((T, rows), int)
    for r in range(rows):
        for t in range(T):
            total, k = 0.0, 0
            while True:
                j = t + k
                if k == n or j == T:  # n steps taken, or the segment's bootstrap row reached
                    ret[t, r], disc[t, r], nxt[t, r] = total, gamma**k, j
                    break
                total += gamma**k * reward[j, r]
                if terminated[j, r]:
                    ret[t, r], disc[t, r], nxt[t, r] = total, 0.0, j
                    break
                if truncated[j, r]:
                    ret[t, r], disc[t, r], nxt[t, r] = total, gamma ** (k + 1), j
                    break
                k += 1
    return ret, disc, nxt


@pytest.mark.parametrize("n", [1, 3, 8])
def test_nstep_matches_reference_loop(n):
    rng = np.random.default_rng(n)
    T, rows = 10, 6
    reward = rng.normal(size=(T + 1, rows)).astype(np.float32)
    terminated = rng.random((T + 1, rows)) < 0.15
    truncated = rng.random((T + 1, rows)) < 0.1
    got = nstep_returns(reward, terminated, truncated, 0.9, n)
    want = nstep_reference(reward, terminated, truncated, 0.9, n)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)
    live = want[1] > 0  # after a termination the bootstrap row is irrelevant
    np.testing.assert_array_equal(got[2][live], want[2][live])


def test_segment_transitions_pick_next_observations():
    T, rows = 4, 3
    obs = np.arange((T + 1) * rows * 2, dtype=np.float32).reshape(T + 1, rows, 2)
    segment = {
        C.OBS: obs, C.ACTION: np.zeros((T + 1, rows), np.int64), C.REWARD: np.ones((T + 1, rows), np.float32),
        C.TERMINATED: np.zeros((T + 1, rows), bool), C.TRUNCATED: np.zeros((T + 1, rows), bool),
    }
    segment[C.TERMINATED][1, 0] = True
    out = segment_transitions(segment, gamma=0.5, n=2)
    assert out[C.OBS].shape == (T * rows, 2)
    # step 0 row 1: two steps, bootstraps from obs[2, 1]; step 3 row 2: segment end, obs[4, 2]
    np.testing.assert_array_equal(out[C.NEXT_OBS][0 * rows + 1], obs[2, 1])
    np.testing.assert_array_equal(out[C.NEXT_OBS][3 * rows + 2], obs[4, 2])
    assert out[C.REWARD][0 * rows + 1] == pytest.approx(1.5) and out[C.DISCOUNT][0 * rows + 1] == 0.25
    assert out[C.DISCOUNT][0] == 0.0 and out[C.REWARD][0] == pytest.approx(1.5)  # terminated at step 1


def _memory(capacity, prioritized, **kw):
    fields = transition_fields(FieldSpec((1,), np.float32), FieldSpec((), np.int64))
    return ReplayMemory(fields, capacity, prioritized=prioritized, seed=0, **kw)


def _transitions(start, n):
    k = np.arange(start, start + n)
    return {C.OBS: k[:, None].astype(np.float32), C.ACTION: k, C.REWARD: k.astype(np.float32),
            C.DISCOUNT: np.ones(n, np.float32), C.NEXT_OBS: k[:, None].astype(np.float32) + 1}


def _batch(size):
    return {n: np.zeros((size, *f.shape), f.dtype)
            for n, f in batch_fields(FieldSpec((1,), np.float32), FieldSpec((), np.int64)).items()}


def test_memory_ring_keeps_the_newest_and_samples_uniformly():
    memory = _memory(10, prioritized=False)
    memory.add(_transitions(0, 7))
    memory.add(_transitions(7, 7))  # wraps: 4..13 kept
    assert memory.size == 10 and sorted(memory.data[C.ACTION]) == list(range(4, 14))
    memory.add(_transitions(100, 25))  # more than fit at once: the newest 10
    assert sorted(memory.data[C.ACTION]) == list(range(115, 125))
    counts = np.zeros(10)
    batch = _batch(500)
    for _ in range(20):
        memory.sample(batch)
        np.testing.assert_array_equal(batch[C.ACTION], memory.data[C.ACTION][batch[C.INDEX]])
        np.testing.assert_array_equal(batch[C.STAMP], batch[C.ACTION] - 100 + 14)  # 14 inserted before
        counts += np.bincount(batch[C.INDEX], minlength=10)
    assert (batch[C.WEIGHT] == 1).all()
    assert counts.min() > 0.8 * counts.mean()


def test_prioritized_sampling_follows_priorities_and_weights():
    memory = _memory(4, prioritized=True, alpha=1.0, beta=1.0, priority_eps=1e-6)
    memory.add(_transitions(0, 4))
    index, stamp = np.arange(4), np.arange(4)
    assert memory.update_priorities(index, stamp, np.array([1.0, 2.0, 3.0, 4.0])) == 4
    counts = np.zeros(4)
    batch = _batch(1000)
    for _ in range(10):
        memory.sample(batch)
        counts += np.bincount(batch[C.INDEX], minlength=4)
    np.testing.assert_allclose(counts / counts.sum(), [0.1, 0.2, 0.3, 0.4], atol=0.01)
    # w_i = (N P(i))^-beta / max w: with beta = 1, proportional to 1 / p_i, the rarest gets 1
    expected = (1.0 / (np.arange(4) + 1.0)) / 1.0
    np.testing.assert_allclose(batch[C.WEIGHT], expected[batch[C.INDEX]], rtol=1e-5)


def test_stale_priority_updates_are_skipped():
    memory = _memory(2, prioritized=True, alpha=1.0, priority_eps=1e-6)
    memory.add(_transitions(0, 2))
    memory.add(_transitions(2, 1))  # overwrites index 0 (stamp 2)
    assert memory.update_priorities(np.array([0, 1]), np.array([0, 1]), np.array([50.0, 5.0])) == 1
    assert memory.tree.get(np.array([0]))[0] == pytest.approx(1.0)  # new transition: max priority then
    assert memory.tree.get(np.array([1]))[0] == pytest.approx(5.0)
    assert memory.max_priority == pytest.approx(5.0)
