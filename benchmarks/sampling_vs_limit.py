"""srl's sampling rate against the machine's limit, and Gymnasium's AsyncVectorEnv, in one run.

For each env id, every repeat measures three things back to back (so drift in the machine's
load hits all alike), and the median of the repeats is reported:

* limit: one raw env per core (`--procs`, default os.cpu_count()), each in its own process,
  all stepping at once for `--seconds`; their rates are summed. A raw env is
  `gymnasium.make(id)` (Atari ids: with srl's standard preprocessing, srl.envs.atari) stepped
  with actions drawn beforehand as numpy scalars and reset by hand: nothing but the env's cost.
* srl: `srl bench sampling ID` (srl.bench.bench_sampling, its defaults: one inline-inference
  actor per core) for `--seconds` of measured sampling after start-up, plus `--srl` overrides.
* vector_limit (with `--vector-limit-envs N`, ids with a Gymnasium vector entry point): the same
  limit for natively batched stepping, one `gymnasium.make_vec(id, N, vectorization_mode=
  "vector_entry_point")` per process with pre-drawn actions (next-step autoreset, no partial
  resets): the ceiling for srl's `env_backend=vector`.
* async_N: `gymnasium.vector.AsyncVectorEnv` of N envs (one process each, for N in
  `--async-envs`) stepped with batched random actions for `--seconds`, after reset.

    python benchmarks/sampling_vs_limit.py                          # CartPole-v1 and ALE/Pong-v5
    python benchmarks/sampling_vs_limit.py --envs CartPole-v1 --repeats 5 --srl dataflow.envs_per_actor=64

Progress goes to stderr; standard output gets ONE JSON line: per env the medians (env steps
per second), every repeat, `srl_over_limit` (the ratio this benchmark is about, of medians),
the median of each repeat's own ratio, and `srl_actor_env_step_share`: the share of srl's actor
time spent inside `env.step` (a raw env process is at ~1.0), which load disturbs much less.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np

from srl.bench import bench_sampling
from srl.envs.atari import is_atari_id, make_atari

POOL = 4096  # actions drawn beforehand per process, cycled through


def log(msg: str) -> None:
    print(f"[sampling_vs_limit] {msg}", file=sys.stderr, flush=True)


def make_raw(env_id: str) -> gym.Env:
    return make_atari(env_id) if is_atari_id(env_id) else gym.make(env_id)


def raw_env_rate(env_id: str, seconds: float, seed: int, start: Any, out: Any) -> None:
    """Child process: step one raw env for `seconds` once `start` is set; put steps/s on `out`."""
    env = make_raw(env_id)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(POOL)]
    start.wait()
    steps, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        for i in range(256):
            _, _, terminated, truncated, _ = env.step(actions[(steps + i) % POOL])
            if terminated or truncated:
                env.reset()
        steps += 256
    out.put(steps / (time.perf_counter() - began))
    env.close()


def raw_vector_rate(env_id: str, num_envs: int, seconds: float, seed: int, start: Any, out: Any) -> None:
    """Child process: step one natively batched env of `num_envs`; put env steps/s on `out`."""
    env = gym.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = [rng.integers(0, 2, num_envs) for _ in range(64)]  # Discrete(2): CartPole
    start.wait()
    steps, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        env.step(actions[steps % 64])
        steps += 1
    out.put(steps * num_envs / (time.perf_counter() - began))
    env.close()


def machine_limit(env_id: str, procs: int, seconds: float, vector_envs: int = 0) -> float:
    """Summed rate of `procs` raw envs (natively batched ones of `vector_envs` if > 0), one
    process each, stepping at the same time."""
    ctx = mp.get_context("spawn")  # a clean interpreter per process, as a user's script would be
    start, out = ctx.Event(), ctx.Queue()
    target, args = (raw_vector_rate, (env_id, vector_envs, seconds)) if vector_envs else (raw_env_rate, (env_id, seconds))
    workers = [ctx.Process(target=target, args=(*args, i, start, out)) for i in range(procs)]
    for w in workers:
        w.start()
    time.sleep(0.5 if not is_atari_id(env_id) else 3.0)  # let every child build its env first
    start.set()
    rates = [out.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join()
    return sum(rates)


def async_rate(env_id: str, num_envs: int, seconds: float) -> float:
    fns = [lambda: make_raw(env_id) for _ in range(num_envs)]
    venv = gym.vector.AsyncVectorEnv(fns)  # next-step autoreset (Gymnasium's default)
    try:
        venv.reset(seed=0)
        venv.action_space.seed(0)
        pool = [venv.action_space.sample() for _ in range(64)]
        steps, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            venv.step(pool[steps % len(pool)])
            steps += 1
        return steps * num_envs / (time.perf_counter() - began)
    finally:
        venv.close()


def srl_rate(env_id: str, seconds: float, overrides: list[str]) -> tuple[float, float]:
    """(env steps/s, share of the actors' wall time spent in env.step): the share is what a raw
    env process has at ~1.0, and it moves much less with the machine's load than rates do."""
    # bench_sampling measures after start-up; give start-up its own allowance on top
    startup_s = 40.0 if is_atari_id(env_id) else 5.0
    result = bench_sampling(env_id, [f"stop.time_limit_s={seconds + startup_s}", *overrides])
    if result["exit_code"] != 0 or not result["env_steps_per_s"]:
        raise RuntimeError(f"srl bench failed: {result}")
    actors = [v for k, v in result["time_breakdown"].items() if k.startswith("actor:")]
    share = sum(a["env_step"] for a in actors) / max(sum(a["wall"] for a in actors), 1e-9)
    return float(result["env_steps_per_s"]), share


def measure(env_id: str, args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"limit": [], "srl": [], **{f"async_{n}": [] for n in args.async_envs}}
    if args.vector_limit_envs:
        runs["vector_limit"] = []
    shares: list[float] = []
    for repeat in range(args.repeats):
        runs["limit"].append(machine_limit(env_id, args.procs, args.seconds))
        if args.vector_limit_envs:
            runs["vector_limit"].append(machine_limit(env_id, args.procs, args.seconds, args.vector_limit_envs))
        rate, share = srl_rate(env_id, args.seconds, args.srl)
        runs["srl"].append(rate)
        shares.append(share)
        for n in args.async_envs:
            runs[f"async_{n}"].append(async_rate(env_id, n, args.seconds))
        log(f"{env_id} repeat {repeat + 1}: " + ", ".join(f"{k}={v[-1]:.0f}" for k, v in runs.items()))
    medians = {k: round(statistics.median(v), 1) for k, v in runs.items()}
    paired = [s / limit for s, limit in zip(runs["srl"], runs["limit"])]  # each repeat's own ratio
    vector = {"srl_over_vector_limit": round(medians["srl"] / medians["vector_limit"], 3)} if args.vector_limit_envs else {}
    return {
        "env_steps_per_s": medians,
        "srl_over_limit": round(medians["srl"] / medians["limit"], 3),
        **vector,
        "srl_over_limit_paired_median": round(statistics.median(paired), 3),
        "srl_actor_env_step_share": round(statistics.median(shares), 3),
        "repeats": {k: [round(x, 1) for x in v] for k, v in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "ALE/Pong-v5"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 1, help="raw env processes (limit)")
    parser.add_argument("--async-envs", type=int, nargs="*", default=[2, 8])
    parser.add_argument("--vector-limit-envs", type=int, default=0,
                        help="also measure raw natively batched envs of N per process (vector entry point ids)")
    parser.add_argument("--srl", nargs="*", default=[], help="overrides for srl bench sampling (key=value)")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be >= 3 (medians)")
    results: dict[str, Any] = {}
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    for env_id in args.envs:
        if is_atari_id(env_id):
            try:
                make_raw(env_id).close()
            except ImportError as error:
                log(f"skipping {env_id}: {error}")
                results[env_id] = {"skipped": str(error)}
                continue
        try:
            results[env_id] = measure(env_id, args)
        except RuntimeError as error:  # one env's failure still leaves the others' results
            log(f"{env_id} failed: {error}")
            results[env_id] = {"failed": str(error)}
    machine = {"cpus": os.cpu_count(), "loadavg_at_start": load_at_start, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
               "processor": platform.processor() or platform.machine(),
               "python": platform.python_version(), "gymnasium": gym.__version__, "numpy": np.__version__}
    print(json.dumps({"benchmark": "sampling_vs_limit", "seconds": args.seconds, "srl_overrides": args.srl,
                      "machine": machine, "results": results}))


if __name__ == "__main__":
    main()
