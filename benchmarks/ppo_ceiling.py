"""What one PPO update's worth of env steps costs on this machine, part by part, and the ceiling
that sets on a PPO experiment's training throughput.

    python benchmarks/ppo_ceiling.py                       # pong-ppo, as the long run in docs/results.md
    python benchmarks/ppo_ceiling.py --set policy_kwargs.trunk_precision=float32
    python benchmarks/ppo_ceiling.py --experiment cartpole-ppo

One update of `pong-ppo` consumes `sample_length x envs_per_actor` env steps (128 x 8 = 1,024) and
costs three things, each measured here alone, with the experiment's own settings and threads:

- **env**: stepping the environments that many steps (EnvPool on its configured threads,
  uniformly random actions);
- **inference**: that many acting forward passes (`policy.rollout`, one batch of `envs_per_actor`
  frames per step, as the actor does);
- **trainer**: one `PPO.step` (GAE, then epochs x minibatches of forward, backward and Adam) on a
  batch of random frames shaped like a real one.

Done in turn, each with the whole machine (what `launch.launcher=inline` does), the three add up:
`ceiling_env_steps_per_s = env_steps / (env + inference + trainer)`. Running them at once can
win at most the cores each part leaves idle (`cores_busy`, CPU seconds over wall seconds); on 2
cores srl's local launcher, which overlaps sampling with training, was no faster than inline
(docs/benchmarks.md). Prints ONE JSON line with medians of `--repeats`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl.api import registry
from srl.config.load import load_config
from srl.data import columns as C
from srl.envs import make_vector_env
from srl.graph import make_policy

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from common import machine_info  # noqa: E402

# pong-ppo as its runs in docs/results.md: EnvPool on 2 threads, 2 torch threads
PONG_LONG_RUN = ["env_backend=envpool", "launch.torch_threads=2", "env_kwargs.num_threads=2"]


def median_s(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median wall seconds of `fn()` over `repeats` calls after a warm-up (first-call allocations,
    oneDNN kernel choice), and the median CPU seconds this process spent meanwhile, all threads."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        wall_0, cpu_0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - wall_0)
        cpu.append(time.process_time() - cpu_0)
    return statistics.median(wall), statistics.median(cpu)


def fake_batch(observation_space: gym.Space, steps: int, rows: int, actions: int, seed: int) -> dict[str, torch.Tensor]:
    """A [steps + 1, rows] segment as the trainer receives one: observations drawn from the space,
    random actions, sparse +-1 rewards, a few episode ends, behaviour log-probs and values of
    plausible size."""
    g = torch.Generator().manual_seed(seed)
    shape = (steps + 1, rows)
    observation_space.seed(seed)
    obs = np.stack([observation_space.sample() for _ in range(shape[0] * shape[1])])
    return {
        C.OBS: torch.from_numpy(obs).reshape(*shape, *observation_space.shape),
        C.ACTION: torch.randint(0, actions, shape, generator=g),
        C.REWARD: (torch.rand(shape, generator=g) < 0.02).float() * torch.sign(torch.randn(shape, generator=g)),
        C.TERMINATED: torch.rand(shape, generator=g) < 0.001,
        C.TRUNCATED: torch.zeros(shape, dtype=torch.bool),
        C.LOG_PROB: torch.full(shape, -float(np.log(actions))),
        C.VALUE: torch.randn(shape, generator=g) * 0.1,
    }


def measure(experiment: str, overrides: list[str], repeats: int) -> dict[str, Any]:
    """Seconds per update of each part of `experiment` (a PPO experiment with a discrete action
    space), each alone, `repeats` times after a warm-up; their medians and the ceilings."""
    config = load_config(experiment, overrides)
    torch.set_num_threads(config.threads_for(trains=True))
    steps, rows = config.dataflow.sample_length, config.dataflow.envs_per_actor
    env = make_vector_env(config.env, config.env_kwargs, rows, backend=config.env_backend)
    try:
        obs = env.reset(config.run.seed)
        rng = np.random.default_rng(config.run.seed)
        n_actions = int(env.action_space.n)

        def run_env() -> None:
            for _ in range(steps):
                env.step(rng.integers(0, n_actions, rows))

        parts = {"env": median_s(run_env, repeats)}
    finally:
        env.close()
    torch.manual_seed(config.run.seed)
    policy = make_policy(config, env.observation_space, env.action_space)
    frames = torch.from_numpy(np.ascontiguousarray(obs))

    def run_inference() -> None:
        with torch.no_grad():
            for _ in range(steps):
                policy.rollout(frames)

    parts["inference"] = median_s(run_inference, repeats)
    algorithm = registry.algorithms.get(config.algorithm).algorithm_cls(policy, config.algo_config, config.stop.total_env_steps)
    batch = fake_batch(env.observation_space, steps, rows, n_actions, config.run.seed)
    parts["trainer"] = median_s(lambda: algorithm.step(batch, 0), repeats)
    return summarize(steps * rows, parts) | {
        "threads": {"torch": torch.get_num_threads(), "env": config.env_kwargs.get("num_threads")}
    }


def summarize(env_steps: int, parts: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """The ceilings from each part's (wall, cpu) seconds per update of `env_steps`. `cores_busy`
    is a part's CPU seconds over its wall seconds: what overlapping it with the others could use
    at most is the rest of the machine's cores (a spinning thread counts as busy)."""
    wall = {k: w for k, (w, _) in parts.items()}
    total_s = sum(wall.values())
    return {
        "env_steps_per_update": env_steps,
        "seconds_per_update": {**{k: round(w, 6) for k, w in wall.items()}, "total": round(total_s, 6)},
        "share": {k: round(w / total_s, 3) for k, w in wall.items()},
        "cores_busy": {k: round(c / w, 2) for k, (w, c) in parts.items()},
        "ceiling_env_steps_per_s": round(env_steps / total_s, 1),
        "ceiling_free_inference": round(env_steps / (wall["env"] + wall["trainer"]), 1),
        "ceiling_trainer_only": round(env_steps / wall["trainer"], 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--experiment", default="pong-ppo")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    overrides = [*(PONG_LONG_RUN if args.experiment == "pong-ppo" else []), *args.set]
    machine = machine_info() | {"torch": torch.__version__}
    result = measure(args.experiment, overrides, args.repeats)
    machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps({
        "benchmark": "ppo_ceiling", "experiment": args.experiment, "overrides": overrides, "repeats": args.repeats,
        "machine": machine, **result,
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
