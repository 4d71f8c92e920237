"""`srl eval`'s play loop against a raw Gymnasium loop with the same policy forward: env steps/s.

    python benchmarks/eval_speed.py [RUN_DIR] [--episodes 20] [--repeats 3]

RUN_DIR: a run of a single-agent Gymnasium env; without one, a short cartpole-ppo run is trained
into a temporary directory first. Both loops step one env with the run's policy loaded from its
checkpoint, deterministic, the same seed, on the same machine, interleaved (srl, raw, srl, raw,
...); each figure is the median of `--repeats`. The srl side is the env and play loop
`srl.evaluation.run.together` steps, timed from the env's construction (the run's loading,
`srl.evaluation.trained.load`, a fixed cost, is timed apart as `srl_load_s`); the raw side is `gymnasium.make`, `reset`, and per
step one `policy.rollout` on `torch.as_tensor(obs[None])` and one `env.step`. Prints one JSON line.
Each side is timed by the wall clock and by this thread's CPU time (`time.thread_time`): on a
machine shared with other jobs the wall-clock ratio swings with their load, the CPU-time one much less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import torch

from srl.config.load import load_config
from srl.evaluation import Player, play
from srl.evaluation.run import make_env
from srl.evaluation.trained import load
from srl.launch.run import run_experiment


def train(run_dir: Path) -> None:
    config = load_config("cartpole-ppo", ["launch.launcher=inline", "stop.total_env_steps=20000",
                                          "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off"])
    assert run_experiment(config) == 0


def srl_loop(config, policy, episodes: int, seed: int) -> tuple[int, float]:
    started = time.perf_counter()
    env = make_env(config.env, dict(config.env_kwargs), config.env_wrappers)
    steps = [0]

    def count() -> None:
        steps[0] += 1

    try:
        play(env, [Player(policy)], episodes, seed, before_step=count)
    finally:
        env.close()
    return steps[0], time.perf_counter() - started


def raw_loop(env_id: str, policy, episodes: int, seed: int) -> tuple[int, float]:
    started = time.perf_counter()
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    steps = done = 0
    with torch.inference_mode():
        while done < episodes:
            action = policy.rollout(torch.as_tensor(obs[None]), deterministic=True)["action"].numpy()[0]
            obs, _, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated:
                done += 1
                obs, _ = env.reset()
    env.close()
    return steps, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?")
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=12345)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as `srl eval` runs it (launch.torch_threads)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.run_dir) if args.run_dir else Path(tmp) / "cartpole"
        if not args.run_dir:
            train(run_dir)
        started = time.perf_counter()
        run = load(run_dir)
        config, policy = run.graph.config, run.policies[""]
        load_s = time.perf_counter() - started
        srl_rates, raw_rates, srl_cpu_rates, raw_cpu_rates, steps = [], [], [], [], 0
        for _ in range(args.repeats):
            cpu_started = time.thread_time()
            steps, seconds = srl_loop(config, policy, args.episodes, args.seed)
            srl_cpu_rates.append(steps / (time.thread_time() - cpu_started))
            srl_rates.append(steps / seconds)
            cpu_started = time.thread_time()
            raw_steps, raw_seconds = raw_loop(config.env, policy, args.episodes, args.seed)
            raw_cpu_rates.append(raw_steps / (time.thread_time() - cpu_started))
            raw_rates.append(raw_steps / raw_seconds)
    srl_rate, raw_rate = statistics.median(srl_rates), statistics.median(raw_rates)
    srl_cpu, raw_cpu = statistics.median(srl_cpu_rates), statistics.median(raw_cpu_rates)
    print(json.dumps({"env": config.env, "episodes": args.episodes, "steps": steps,
                      "srl_eval_steps_per_s": round(srl_rate, 1), "raw_loop_steps_per_s": round(raw_rate, 1),
                      "ratio": round(srl_rate / raw_rate, 3), "srl_eval_steps_per_cpu_s": round(srl_cpu, 1),
                      "raw_loop_steps_per_cpu_s": round(raw_cpu, 1), "cpu_ratio": round(srl_cpu / raw_cpu, 3),
                      "srl_load_s": round(load_s, 3), "repeats": args.repeats}))


if __name__ == "__main__":
    main()
