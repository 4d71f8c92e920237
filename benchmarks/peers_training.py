"""PPO training throughput (env steps consumed per second) of srl and its peers, side by side.

    python benchmarks/peers_training.py                 # CartPole and Pong, 3 interleaved repeats
    python benchmarks/peers_training.py --quick         # a smoke run: small budgets, one repeat
    python benchmarks/peers_training.py --envs cartpole --peers srl rllib
    python benchmarks/peers_training.py --envs pong --srl env_backend=envpool
    python benchmarks/peers_training.py --envs pong --peers srl srl_float32 sample_factory rllib --srl env_backend=envpool

Sides: srl (`srl run cartpole-ppo` / `pong-ppo` with a fixed env-step budget and no target, this
checkout, system python), Sample Factory 2.1.1 APPO and RLlib (ray 2.60) PPO, each peer in its
own virtualenv under ~/.cache/srl-peers. Each side runs the same env-step budget; its rate leaves
start-up out (srl and Sample Factory: between their first report with env steps and their last;
RLlib: from the first `train()` to the last). The peers use srl's per-update work (CartPole: 16
envs x 32 steps, 10 epochs of one minibatch, 64x64 MLP; Pong: 1024 steps, 4 epochs of 4
minibatches, Nature CNN on 4 stacked 84x84 frames; `srl_float32` is pong-ppo with its CNN trunk
in float32, the peers' precision, where pong-ppo itself takes bfloat16 on hardware with bfloat16
units; srl's Pong keeps v5's sticky actions, 0.25, as the peers' envs do, where pong-ppo itself
turns them off). A missing `pong-ppo` in this checkout is reported as skipped. Standard
output gets ONE JSON line: per-side runs, medians and srl's median over each peer's.
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

import rllib_peer
import sf_peer
import srl_side
from common import interleave, machine_info

ENVS = ("cartpole", "pong")


def srl_float32(env: str, steps: int, overrides: list[str] | None = None) -> dict[str, Any]:
    """pong-ppo with its CNN trunk forced to float32, the peers' precision (its default, "auto",
    computes the trunk in bfloat16 where the CPU has bfloat16 units)."""
    if env != "pong":
        return {"skipped": "only Pong has a CNN trunk to run in float32"}
    return srl_side.train(env, steps, overrides=[*(overrides or []), "policy_kwargs.trunk_precision=float32"])


SIDES: dict[str, Callable[[str, int], dict[str, Any]]] = {
    "srl": srl_side.train,
    "srl_float32": srl_float32,
    "sample_factory": lambda env, steps: sf_peer.run("train", env, steps),
    "rllib": lambda env, steps: rllib_peer.run("train", env, steps),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small budgets, one repeat (a smoke run)")
    parser.add_argument("--repeats", type=int, help="interleaved repeats (default 3; 1 with --quick)")
    parser.add_argument("--envs", nargs="+", choices=ENVS, default=list(ENVS))
    parser.add_argument("--peers", nargs="+", choices=list(SIDES), default=[s for s in SIDES if s != "srl_float32"],
                        help="sides to run; srl_float32 (Pong only) is pong-ppo with a float32 CNN trunk")
    parser.add_argument("--cartpole-steps", type=int, help="env-step budget on CartPole (60000; 30000 quick)")
    parser.add_argument("--pong-steps", type=int, help="env-step budget on Pong (16000; 3000 quick)")
    parser.add_argument("--srl", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides for srl's runs, e.g. env_backend=envpool")
    args = parser.parse_args(argv)
    if args.srl:
        SIDES["srl"] = lambda env, steps: srl_side.train(env, steps, overrides=args.srl)
        SIDES["srl_float32"] = lambda env, steps: srl_float32(env, steps, overrides=args.srl)
    repeats = args.repeats or (1 if args.quick else 3)
    budgets = {"cartpole": args.cartpole_steps or (30_000 if args.quick else 60_000),
               "pong": args.pong_steps or (3_000 if args.quick else 16_000)}
    machine = machine_info()
    results: dict[str, Any] = {}
    # SIGTERM ends the run like Ctrl-C: each child's process group is killed on the way out
    signal.signal(signal.SIGTERM, _interrupt)
    interrupted = False
    try:
        interleave(results, args.envs, SIDES, args.peers, repeats, budgets, "env steps")
    except KeyboardInterrupt:
        interrupted = True
    print(json.dumps({"interrupted": interrupted, "benchmark": "peers_training", "machine": machine,
                      "loadavg_at_end": [round(x, 2) for x in os.getloadavg()], "repeats": repeats,
                      "env_step_budgets": budgets, "results": results}), flush=True)
    return 130 if interrupted else 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
