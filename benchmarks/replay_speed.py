"""Replay memory speed: transitions stored and sampled per second, uniform vs prioritized, and a
plain-Python sum tree as the reference the vectorized one replaces.

Each case runs in this one process, side by side, for --repeats repeats (median reported), so
machine load hits them alike:

* store: segments of 16 steps x 16 rows of CartPole-sized transitions (n-step 3 computed) added
  to a memory of --capacity;
* sample: batches of --batch-size drawn into preallocated arrays, then (prioritized) the
  priorities of the batch updated, as the buffer worker does for each batch;
* python_tree: the same batch of prefix-sum lookups and priority updates on a list-based sum tree
  walked one item at a time.

    python benchmarks/replay_speed.py --repeats 3

Standard output gets ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.replay import ReplayMemory, batch_fields, segment_transitions, transition_fields

OBS, ACT = FieldSpec((4,), np.float32), FieldSpec((), np.int64)
T, ROWS = 16, 16


def segment(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {C.OBS: rng.random((T + 1, ROWS, 4), np.float32), C.ACTION: rng.integers(0, 2, (T + 1, ROWS)),
            C.REWARD: np.ones((T + 1, ROWS), np.float32), C.TERMINATED: rng.random((T + 1, ROWS)) < 0.02,
            C.TRUNCATED: np.zeros((T + 1, ROWS), bool)}


def store_rate(memory: ReplayMemory, seconds: float) -> float:
    rng, count, started = np.random.default_rng(0), 0, time.perf_counter()
    seg = segment(rng)
    while time.perf_counter() - started < seconds:
        memory.add(segment_transitions(seg, 0.99, 3))
        count += T * ROWS
    return count / (time.perf_counter() - started)


def sample_rate(memory: ReplayMemory, batch_size: int, seconds: float) -> float:
    out = {n: np.zeros((batch_size, *f.shape), f.dtype) for n, f in batch_fields(OBS, ACT).items()}
    rng, count, started = np.random.default_rng(1), 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        memory.sample(out)
        memory.update_priorities(out[C.INDEX], out[C.STAMP], rng.random(batch_size))
        count += batch_size
    return count / (time.perf_counter() - started)


class PythonSumTree:
    """The reference: one item at a time, as a plain loop would do it."""

    def __init__(self, capacity: int) -> None:
        self.leaves = 1 << (capacity - 1).bit_length()
        self.tree = [0.0] * (2 * self.leaves)

    def update(self, index: int, value: float) -> None:
        node = self.leaves + index
        self.tree[node] = value
        while node > 1:
            node //= 2
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]

    def find(self, u: float) -> int:
        node = 1
        while node < self.leaves:
            node *= 2
            if u >= self.tree[node]:
                u -= self.tree[node]
                node += 1
        return node - self.leaves


def python_tree_rate(capacity: int, batch_size: int, seconds: float) -> float:
    tree, rng = PythonSumTree(capacity), np.random.default_rng(2)
    for i in range(capacity):
        tree.update(i, 1.0)
    count, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for u in (rng.random(batch_size) * tree.tree[1]).tolist():
            tree.update(tree.find(u), 1.0 + u % 1.0)
        count += batch_size
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {}
    for _ in range(args.repeats):
        for prioritized in (False, True):
            name = "prioritized" if prioritized else "uniform"
            memory = ReplayMemory(transition_fields(OBS, ACT), args.capacity, prioritized=prioritized)
            runs.setdefault(f"{name}_store_per_s", []).append(store_rate(memory, args.seconds))
            runs.setdefault(f"{name}_sample_per_s", []).append(sample_rate(memory, args.batch_size, args.seconds))
        runs.setdefault("python_tree_sample_per_s", []).append(
            python_tree_rate(args.capacity, args.batch_size, args.seconds))
    out = {key: round(statistics.median(values)) for key, values in runs.items()}
    out["prioritized_vs_python_tree"] = round(out["prioritized_sample_per_s"] / out["python_tree_sample_per_s"], 2)
    out.update(capacity=args.capacity, batch_size=args.batch_size, repeats=args.repeats,
               machine=f"{platform.machine()} {platform.processor() or ''}".strip(), runs=runs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
