"""Replay memory: a ring of n-step transitions, sampled uniformly or by priority.

Prioritized replay (Schaul et al., 2016): transition i is sampled with probability
P(i) = p_i^alpha / sum_k p_k^alpha, where p_i = |TD error| + priority_eps as last reported by the
trainer (new transitions get the largest priority seen so far, so each is replayed soon). The
bias this introduces is corrected by importance weights w_i = (N * P(i))^-beta, divided by the
batch's largest so that they only ever scale updates down (Ape-X, Horgan et al., 2018).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.nstep import nstep_returns
from srl.data.sumtree import SumTree
from srl.spaces import SEP, Obs, map_obs, obs_of

Transitions = dict[str, np.ndarray]  # column -> [n, ...]


def transition_fields(obs: FieldSpec | dict[str, FieldSpec], action: FieldSpec) -> dict[str, FieldSpec]:
    """What the memory stores per transition. `obs`: the observation's spec, or for a Dict/Tuple
    observation leaf path -> spec (srl.spaces.leaf_fields), stored as a column per leaf and per
    side: "obs/<path>" and "next_obs/<path>" (a goal env's observation, achieved and desired goal)."""
    return {
        **observation_columns(C.OBS, obs),
        C.ACTION: action,
        C.REWARD: FieldSpec((), np.float32),
        C.DISCOUNT: FieldSpec((), np.float32),
        **observation_columns(C.NEXT_OBS, obs),
    }


def observation_columns(name: str, obs: Any) -> dict[str, Any]:
    """`obs` (one value, or leaf path -> value) under the column names of observation `name`
    ("obs" or "next_obs"; a leaf's: "obs/<path>", srl.spaces.obs_of reads them back)."""
    if isinstance(obs, dict):
        return {f"{name}{SEP}{path}": value for path, value in obs.items()}
    return {name: obs}


def replay_columns() -> dict[str, FieldSpec]:
    """What a replay batch row carries besides its item: its importance weight, where it came
    from, and the priority the trainer writes back."""
    return {
        C.WEIGHT: FieldSpec((), np.float32),
        C.INDEX: FieldSpec((), np.int64),
        C.STAMP: FieldSpec((), np.int64),
        C.PRIORITY: FieldSpec((), np.float32),
    }


def batch_fields(obs: FieldSpec, action: FieldSpec) -> dict[str, FieldSpec]:
    """What one replay batch row of n-step transitions carries to the trainer."""
    return {**transition_fields(obs, action), **replay_columns()}


def segment_transitions(segment: dict[str, np.ndarray], gamma: float, n: int) -> Transitions:
    """The T * rows n-step transitions of a [T + 1, rows, ...] segment, step-major."""
    nstep = nstep_returns(segment[C.REWARD], segment[C.TERMINATED], segment[C.TRUNCATED], gamma, n)
    return step_transitions(obs_of(segment), segment[C.ACTION], *nstep)


def step_transitions(obs: Obs, action: np.ndarray, ret: np.ndarray, discount: np.ndarray,
                     next_t: np.ndarray) -> Transitions:  # fmt: skip
    """The transitions of [T + 1, rows, ...] `obs` (or leaf path -> [T + 1, rows, ...]) and
    `action`, step-major, with the rows' n-step return, discount and bootstrap step [T, rows]
    (srl.data.nstep)."""
    T, rows = ret.shape
    return {
        **observation_columns(C.OBS, map_obs(lambda o: o[:T].reshape(T * rows, *o.shape[2:]), obs)),
        C.ACTION: action[:T].reshape(T * rows, *action.shape[2:]),
        C.REWARD: ret.reshape(-1),
        C.DISCOUNT: discount.reshape(-1),
        **observation_columns(C.NEXT_OBS, map_obs(lambda o: o[next_t, np.arange(rows)].reshape(T * rows, *o.shape[2:]), obs)),
    }


class ReplayMemory:
    def __init__(
        self,
        fields: dict[str, FieldSpec],
        capacity: int,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-3,
        seed: int = 0,
    ) -> None:
        if priority_eps <= 0:
            raise ValueError(f"priority_eps must be > 0 (a zero priority is never replayed), got {priority_eps}")
        self.capacity = capacity
        self.data = {name: np.zeros((capacity, *f.shape), f.dtype) for name, f in fields.items()}
        self.batch_columns = tuple(fields)  # what a batch gets of each item (a subclass may store more)
        self.stamp = np.full(capacity, -1, np.int64)
        self.inserted = 0  # transitions ever added; also the next one's stamp
        self.tree = SumTree(capacity) if prioritized else None
        self.alpha, self.beta, self.priority_eps = alpha, beta, priority_eps
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)

    @property
    def size(self) -> int:
        return min(self.inserted, self.capacity)

    def add(self, transitions: Transitions) -> None:
        n = len(transitions[C.REWARD])
        skip = max(0, n - self.capacity)  # more than fit: only the newest are kept
        stamps = self.inserted + np.arange(skip, n)
        index = stamps % self.capacity
        for name, array in self.data.items():
            array[index] = transitions[name][skip:]
        self.stamp[index] = stamps
        self.inserted += n
        if self.tree is not None:
            self.tree.update(index, np.full(len(index), self.max_priority**self.alpha))

    def sample(self, out: dict[str, np.ndarray]) -> None:
        """Fill the batch arrays `out` (batch_fields, [B, ...]) with B sampled transitions."""
        if self.size == 0:
            raise RuntimeError("cannot sample from an empty replay memory")
        B = len(out[C.INDEX])
        if self.tree is None:
            index = self.rng.integers(0, self.size, B)
            out[C.WEIGHT][:] = 1.0
        else:
            total = self.tree.total
            prefix = (np.arange(B) + self.rng.random(B)) * (total / B)  # one draw per stratum
            index = np.minimum(self.tree.find(prefix), self.size - 1)
            weight = (self.size * self.tree.get(index) / total) ** -self.beta
            out[C.WEIGHT][:] = weight / weight.max()
        for name in self.batch_columns:
            np.take(self.data[name], index, axis=0, out=out[name])
        out[C.INDEX][:] = index
        out[C.STAMP][:] = self.stamp[index]

    def update_priorities(self, index: np.ndarray, stamp: np.ndarray, td_abs: np.ndarray) -> int:
        """Set priorities from |TD errors|; rows whose transition was overwritten since it was
        sampled are skipped (the new one keeps its own), and so are non-finite ones (an update
        undone for them, srl.workers.nonfinite: a NaN would corrupt the sum tree). Returns how
        many were updated."""
        if self.tree is None:
            return 0
        keep = (self.stamp[index] == stamp) & np.isfinite(td_abs)
        priority = np.abs(td_abs[keep]).astype(np.float64) + self.priority_eps
        if priority.size:
            self.max_priority = max(self.max_priority, float(priority.max()))
            self.tree.update(index[keep], priority**self.alpha)
        return int(keep.sum())
