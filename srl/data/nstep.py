"""n-step returns of a [T + 1, rows] segment, for replay (targets bootstrap from a later state).

For each step t < T of each row, with m the number of steps actually taken (at most n):

    return_t   = sum_{k < m} gamma^k r_{t+k}
    discount_t = gamma^m, or 0 if the episode terminated within those m steps
    next_t     = the segment row whose observation the target bootstraps from

m stops early at a termination (no bootstrap), at a truncation, and at the segment's end (row T,
the bootstrap row, is the last state the segment holds). A truncated episode's final
observation is not stored (the actor auto-resets on the same step), so, as in srl.algos.gae, the
target bootstraps from the last observed state: next_t = the truncated step itself, with
discount gamma^(k + 1).
"""

from __future__ import annotations

import numpy as np


def nstep_returns(
    reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, gamma: float, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(return [T, rows] float32, discount [T, rows] float32, next_t [T, rows] int64)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    T = reward.shape[0] - 1
    if T < 1:
        raise ValueError(f"segments need T >= 1 steps, got reward shaped {reward.shape}")
    rows = reward.shape[1:]
    t = np.arange(T).reshape(T, *([1] * len(rows)))
    ret = np.zeros((T, *rows), np.float64)
    next_t = np.broadcast_to(np.minimum(t + n, T), (T, *rows)).copy()
    discount = gamma ** (next_t - t).astype(np.float64)
    alive = np.ones((T, *rows), bool)
    for k in range(n):  # n is small; each pass is vectorized over steps and rows
        j = np.minimum(np.arange(T) + k, T - 1)  # [T]: the step each t looks at
        live = alive & ((t + k) < T)
        ret += np.where(live, gamma**k * reward[j], 0.0)
        term = live & terminated[j].astype(bool)
        trunc = live & truncated[j].astype(bool) & ~term
        discount[term] = 0.0
        discount[trunc] = gamma ** (k + 1)
        ended = term | trunc
        next_t[ended] = np.broadcast_to(j.reshape(t.shape), next_t.shape)[ended]
        alive &= ~ended
    return ret.astype(np.float32), discount.astype(np.float32), next_t
