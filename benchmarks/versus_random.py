"""Win / draw / loss of a turn-based run's latest checkpoint against random legal moves.

    srl run tictactoe-ppo run.seed=1 stop.total_env_steps=40000 run.run_dir=runs/ttt
    python benchmarks/versus_random.py runs/ttt --games 400 --seed 7

Prints ONE JSON line: the untrained policy's score (same seed, fresh weights) and the trained
one's. The policy plays each seat in turn (srl.evaluate.score_against).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from srl import checkpoint
from srl.config import load_saved_config
from srl.config.checks import build_config
from srl.evaluate import score_against
from srl.graph import build_graph, make_policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--games", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    config = build_config(load_saved_config(args.run_dir))
    graph = build_graph(config)
    torch.manual_seed(config.run.seed)
    policy = make_policy(config, graph.observation_space, graph.action_space)
    untrained = score_against(policy, config.env, config.env_kwargs, args.games, args.seed)
    state = checkpoint.load_latest(args.run_dir)
    policy.load_state_dict(state["policy"])
    trained = score_against(policy, config.env, config.env_kwargs, args.games, args.seed)
    print(
        json.dumps(
            {
                "run_dir": str(args.run_dir),
                "policy_version": state["version"],
                "games": args.games,
                "untrained": untrained,
                "trained": trained,
            }
        )
    )


if __name__ == "__main__":
    main()
