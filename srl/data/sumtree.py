"""Sum tree: the prioritized-replay index (Schaul et al., 2016), vectorized over batches.

Leaves hold one priority per replay index; every inner node holds the sum of its two children,
so the root is the total. Sampling index i with probability p_i / total is a descent from the
root with a prefix sum u in [0, total): go left while u < left child's sum, else subtract it and
go right. Both `update` and `find` take whole batches and touch log2(capacity) levels with numpy
ops, never a Python loop over items.
"""

from __future__ import annotations

import numpy as np


class SumTree:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.levels = max(1, int(np.ceil(np.log2(capacity))))
        self.leaves = 1 << self.levels  # leaf i lives at node leaves + i; node 1 is the root
        self.tree = np.zeros(2 * self.leaves, np.float64)

    @property
    def total(self) -> float:
        return float(self.tree[1])

    def get(self, index: np.ndarray) -> np.ndarray:
        return self.tree[self.leaves + np.asarray(index)]

    def update(self, index: np.ndarray, priority: np.ndarray) -> None:
        """Set the priorities of `index` (a repeated index keeps its last value)."""
        index = np.asarray(index, np.int64)
        if index.size == 0:
            return
        if index.min() < 0 or index.max() >= self.capacity:
            raise IndexError(f"replay index out of [0, {self.capacity})")
        priority = np.asarray(priority, np.float64)
        if (priority < 0).any() or not np.isfinite(priority).all():
            raise ValueError("priorities must be finite and >= 0")
        node = self.leaves + index
        self.tree[node] = priority
        for _ in range(self.levels):  # recompute each touched parent from its two children
            # a parent listed twice gets the same sum twice: no need to sort out duplicates
            node = node >> 1
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]

    def set_leaves(self, priority: np.ndarray) -> None:
        """Set the first len(priority) leaves (the rest 0) and rebuild every sum level by level:
        one contiguous pass per level, where `update` on all leaves would gather and scatter."""
        priority = np.asarray(priority, np.float64)
        if priority.ndim != 1 or len(priority) > self.capacity:
            raise ValueError(f"need at most {self.capacity} priorities in one row, got shape {priority.shape}")
        if (priority < 0).any() or not np.isfinite(priority).all():
            raise ValueError("priorities must be finite and >= 0")
        self.tree[:] = 0.0
        self.tree[self.leaves:self.leaves + len(priority)] = priority
        lo = self.leaves
        while lo > 1:  # nodes lo//2 .. lo-1 are the parents of nodes lo .. 2*lo-1
            self.tree[lo // 2:lo] = self.tree[lo:2 * lo:2] + self.tree[lo + 1:2 * lo:2]
            lo //= 2

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """Leaf indices whose cumulative-sum interval holds each prefix (clipped into [0, total))."""
        u = np.clip(np.asarray(prefix, np.float64), 0.0, np.nextafter(self.total, 0.0))
        node = np.ones(u.shape, np.int64)
        for _ in range(self.levels):
            left = self.tree[2 * node]
            right = u >= left
            u = np.where(right, u - left, u)
            node = 2 * node + right
        return np.minimum(node - self.leaves, self.capacity - 1)
