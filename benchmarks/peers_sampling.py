"""Sampling throughput (random policy, env steps/s) of srl and its peers, side by side.

    python benchmarks/peers_sampling.py                 # CartPole and Pong, 3 interleaved repeats
    python benchmarks/peers_sampling.py --quick         # a smoke run: short, one repeat
    python benchmarks/peers_sampling.py --envs cartpole --peers srl envpool

Sides: srl (`srl bench sampling`, system python, this checkout), gymnasium AsyncVectorEnv,
EnvPool, Sample Factory 2.1.1 and RLlib env runners, each peer in its own virtualenv under
~/.cache/srl-peers (created on first use; see benchmarks/peers/common.py). Every repeat runs
every side once, in a rotated order, so the machine's drift hits all alike. A peer that fails to
install or run is reported as {"error": ...}. Progress goes to stderr; standard output gets ONE
JSON line with per-side runs, medians and srl's median over each peer's.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))

import envpool_peer
import gym_async_peer
import rllib_peer
import sf_peer
import srl_side
from common import interleave, machine_info

ENVS = ("cartpole", "pong")
# Envs per peer on 2 cores: vectorisers with one process per env get a few; thread pools 8.
SIDES: dict[str, Callable[[str, float], dict[str, Any]]] = {
    # srl's time limit counts from launch: its start-up (~10-25 s on a busy 2-core VM) goes on top
    "srl": lambda env, s: srl_side.sample(env, s + (30 if env == "pong" else 15)),
    "gym_async": lambda env, s: gym_async_peer.sample(env, s, 8 if env == "cartpole" else 4),
    "envpool": lambda env, s: envpool_peer.sample(env, s, 8, 2),
    "sample_factory": lambda env, s: sf_peer.sample(env, s),
    "rllib": lambda env, s: rllib_peer.run("sample", env, s),
}



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs, one repeat (a smoke run)")
    parser.add_argument("--repeats", type=int, help="interleaved repeats (default 3; 1 with --quick)")
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--peers", nargs="+", choices=list(SIDES), default=list(SIDES))
    args = parser.parse_args(argv)
    repeats = args.repeats or (1 if args.quick else 3)
    seconds = {"cartpole": 4.0, "pong": 8.0} if args.quick else {"cartpole": 10.0, "pong": 30.0}
    machine = machine_info()
    results: dict[str, Any] = {}
    # SIGTERM ends the run like Ctrl-C: each child's process group is killed on the way out
    signal.signal(signal.SIGTERM, _interrupt)
    interrupted = False
    try:
        interleave(results, args.envs, SIDES, args.peers, repeats, seconds, "s")
    except KeyboardInterrupt:
        interrupted = True
    print(json.dumps({"interrupted": interrupted, "benchmark": "peers_sampling", "machine": machine,
                      "loadavg_at_end": [round(x, 2) for x in os.getloadavg()], "repeats": repeats,
                      "measure_s": seconds, "results": results}), flush=True)
    return 130 if interrupted else 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
