"""Env steps per second: batched torch CartPole (srl.envs.batched) against raw Gymnasium CartPole-v1.

Both sides run in this one process, one after the other, each for a fixed wall time per repeat
(median of the repeats is reported), so load on the machine hits both alike:

* batched: `BatchedCartPole(N).step(actions)` in a loop under `torch.inference_mode`, for each
  N in --num-envs; actions are uniform random {0, 1}, drawn beforehand as a pool of 256 batches
  that the loop cycles through (the timing is the env's, not the RNG's). Episodes end and
  auto-reset inside the batch as in training.
* gymnasium: one `gymnasium.make("CartPole-v1")` env stepped with random actions (drawn
  beforehand), reset by hand when an episode ends: the single-process Python baseline.

    python benchmarks/batched_env_speed.py                       # N = 4096 and 16384, CPU
    python benchmarks/batched_env_speed.py --num-envs 65536 --device cuda

Progress goes to stderr; standard output gets ONE JSON line: env_steps_per_s (the first N),
gymnasium_steps_per_s, ratio, and per N the same with every repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import gymnasium as gym
import numpy as np
import torch

from srl.envs.batched import BatchedCartPole

POOL = 256  # pre-drawn action batches, at most
POOL_BYTES = 2**31  # and at most this much of them


def log(msg: str) -> None:
    print(f"[batched_env_speed] {msg}", file=sys.stderr, flush=True)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def batched_steps_per_s(num_envs: int, seconds: float, device: torch.device, seed: int) -> float:
    env = BatchedCartPole(num_envs, device=device, seed=seed)
    g = torch.Generator(device=device).manual_seed(seed)
    # int64 actions, as the env takes them; fewer pre-drawn batches where N is large (256 x 2^25
    # int64 would be 64 GiB)
    pool_size = max(8, min(POOL, POOL_BYTES // (8 * num_envs)))
    pool = torch.randint(0, 2, (pool_size, num_envs), generator=g, device=device)
    env.reset(seed)
    with torch.inference_mode():
        for i in range(50):  # warm-up: allocator, kernels, caches
            env.step(pool[i % pool_size])
        _sync(device)
        steps, started = 0, time.perf_counter()
        deadline = started + seconds
        while True:
            for i in range(pool_size):  # check the clock once per pass over the pool
                env.step(pool[i])
            steps += pool_size
            _sync(device)
            now = time.perf_counter()
            if now >= deadline:
                break
    return steps * num_envs / (now - started)


def gymnasium_steps_per_s(seconds: float, seed: int) -> float:
    env = gym.make("CartPole-v1")
    actions = np.random.default_rng(seed).integers(0, 2, 100_000).tolist()
    env.reset(seed=seed)
    steps, started = 0, time.perf_counter()
    deadline = started + seconds
    n = len(actions)
    while True:
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(actions[steps % n])
            steps += 1
            if terminated or truncated:
                env.reset()
        now = time.perf_counter()
        if now >= deadline:
            break
    env.close()
    return steps / (now - started)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--seconds", type=float, default=2.0, help="wall time of one repeat, per side and N")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1 is fastest on 2 cores)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    gym_runs, by_n = [], {n: [] for n in args.num_envs}
    for r in range(args.repeats):  # interleaved, so drifting load hits every side alike
        for n in args.num_envs:
            rate = batched_steps_per_s(n, args.seconds, device, args.seed + r)
            by_n[n].append(rate)
            log(f"repeat {r + 1}/{args.repeats}: batched N={n}: {rate:,.0f} env steps/s")
        rate = gymnasium_steps_per_s(args.seconds, args.seed + r)
        gym_runs.append(rate)
        log(f"repeat {r + 1}/{args.repeats}: gymnasium CartPole-v1: {rate:,.0f} env steps/s")

    gym_rate = statistics.median(gym_runs)
    per_n = {
        str(n): {
            "env_steps_per_s": round(statistics.median(runs)),
            "repeats": [round(x) for x in runs],
            "ratio": round(statistics.median(runs) / gym_rate, 1),
        }
        for n, runs in by_n.items()
    }
    first = per_n[str(args.num_envs[0])]
    result = {
        "benchmark": "batched_env_speed",
        "env": "CartPole-v1",
        "num_envs": args.num_envs[0],
        "env_steps_per_s": first["env_steps_per_s"],
        "gymnasium_steps_per_s": round(gym_rate),
        "ratio": first["ratio"],
        "by_num_envs": per_n,
        "gymnasium_repeats": [round(x) for x in gym_runs],
        "seconds_per_repeat": args.seconds,
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "gymnasium": gym.__version__,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
    }
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
