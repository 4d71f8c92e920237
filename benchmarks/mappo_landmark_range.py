"""A trained mpe-mappo policy on simple_spread with landmarks placed as PettingZoo does and as the
MAPPO paper's code does, side by side.

    python benchmarks/mappo_landmark_range.py runs/mappo-long --episodes 500

PettingZoo's simple_spread (mpe2) draws landmark positions uniformly in [-1, 1]^2; the MAPPO
paper's fork draws them in [-0.8, 0.8]^2 (agents in [-1, 1]^2 in both). The paper's figure was
measured on its own placement, so the same policy is scored on both: `srl.evaluate.evaluate_run`
plays `--episodes` episodes with each placement (actions sampled, as in training, and greedy),
and the per-agent returns are converted to the paper's scale (srl.experiments.multiagent.
paper_spread_return). Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from srl.evaluate import evaluate_run
from srl.experiments.multiagent import paper_spread_return

RANGES = {"pettingzoo": 1.0, "paper": 0.8}  # half-width of the square landmarks are drawn in


@contextlib.contextmanager
def landmarks_within(half_width: float) -> Iterator[None]:
    """Every simple_spread reset in this process draws landmarks uniformly in [-w, w]^2."""
    from mpe2.simple_spread.simple_spread import Scenario

    original = Scenario.reset_world

    def reset_world(self: Any, world: Any, np_random: np.random.Generator) -> None:
        original(self, world, np_random)
        for landmark in world.landmarks:
            landmark.state.p_pos = np_random.uniform(-half_width, half_width, world.dim_p)

    Scenario.reset_world = reset_world
    try:
        yield
    finally:
        Scenario.reset_world = original


def score(run_dir: str, episodes: int, seed: int, half_width: float, deterministic: bool) -> dict[str, float]:
    with landmarks_within(half_width):
        result = evaluate_run(run_dir, episodes, seed, deterministic=deterministic)
    per_agent = result["return_mean"]
    return {"per_agent_return": round(per_agent, 3), "paper_scale": round(paper_spread_return(per_agent), 2),
            "per_agent_std": round(result["return_std"], 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", help="an mpe-mappo run directory (its latest checkpoint is played)")
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    results = {
        f"{placement}_{mode}": score(args.run_dir, args.episodes, args.seed, half_width, mode == "greedy")
        for placement, half_width in RANGES.items()
        for mode in ("sampled", "greedy")
    }
    print(json.dumps({"benchmark": "mappo_landmark_range", "run_dir": args.run_dir, "episodes": args.episodes,
                      "seed": args.seed, "landmark_half_widths": RANGES, "results": results}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
