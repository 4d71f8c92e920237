"""benchmarks/mappo_landmark_range.py: landmarks drawn where each placement says, and only inside
its context (the benchmark scores one policy under PettingZoo's and the MAPPO paper's placement)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import mappo_landmark_range as bench  # noqa: E402


def landmark_extent(resets: int = 200) -> float:
    """The largest |coordinate| of any landmark over `resets` seeded resets of simple_spread."""
    from mpe2 import simple_spread_v3

    env = simple_spread_v3.parallel_env(N=3, max_cycles=25)
    extent = 0.0
    for seed in range(resets):
        env.reset(seed=seed)
        positions = np.stack([lm.state.p_pos for lm in env.unwrapped.world.landmarks])
        extent = max(extent, float(np.abs(positions).max()))
    env.close()
    return extent


def test_landmarks_follow_the_placement_and_only_inside_the_context():
    assert landmark_extent() > 0.9  # PettingZoo's [-1, 1]^2
    with bench.landmarks_within(0.8):
        assert landmark_extent() <= 0.8
    assert landmark_extent() > 0.9  # restored
