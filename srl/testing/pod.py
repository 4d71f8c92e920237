"""Pod drivers for tests and benchmarks: train a pod kernel in-process to a target return.

    run = train_pod(target_return=475.0, seed=1, **pod_settings(load_config("cartpole-pod")))

`srl run` trains pods through the controller (srl.workers.pod's `PodKernel` in a worker); these
call the same kernel in a loop, with the same settings, without processes or streams.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from srl.monitor.episodes import ReturnWindow
from srl.streams.reports import Key, PodReport
from srl.workers.pod import PodKernel, make_pod
from srl.workers.stop import LockStepStop, Stop, StopKind, StopRules


def pod_settings(config: Any) -> dict[str, Any]:
    """An experiment config's pod settings as `make_pod` / `train_pod` keyword arguments, so a
    test or benchmark trains exactly what `srl run EXPERIMENT` trains."""
    return {"env": config.env, "env_kwargs": config.env_kwargs, "num_envs": config.dataflow.envs_per_actor,
            "sample_length": config.dataflow.sample_length, "policy": config.policy,
            "policy_kwargs": config.policy_kwargs, "algorithm": config.algorithm, "algo": config.algo_config,
            "schedule_env_steps": config.stop.total_env_steps}


@dataclass
class PodRun:
    """What `train_pod` returns."""

    reached: bool  # the target return was reached (mean of the last `window` episodes)
    stop_reason: str
    env_steps: int
    wall_time_s: float  # from the call (including building the pod) to the stop
    return_mean: float | None  # mean return of the last `window` finished episodes
    episodes: int
    updates: int
    final: PodReport  # the kernel's finish() report of the last interval
    kernel: PodKernel = field(repr=False)
    # (env steps, seconds, mean return of the window) after every poll
    history: list[tuple[int, float, float | None]] = field(default_factory=list, repr=False)

    def summary(self) -> dict[str, Any]:
        """JSON-able view (no kernel, no history)."""
        return {
            "reached": self.reached,
            "stop_reason": self.stop_reason,
            "env_steps": self.env_steps,
            "wall_time_s": round(self.wall_time_s, 3),
            "return_mean": self.return_mean,
            "episodes": self.episodes,
            "updates": self.updates,
            "params_sha256": self.final.get(Key.PARAMS_SHA256),
        }


def train_pod(
    total_env_steps: int = 1_000_000,
    target_return: float | None = None,
    window: int = 100,
    time_limit_s: float | None = None,
    on_poll: Callable[[PodKernel, ReturnWindow], None] | None = None,
    schedule_env_steps: int | None = None,
    torch_threads: int | None = None,
    lock_step: bool = False,
    report_interval_s: float = 0.0,
    **pod_kwargs: Any,
) -> PodRun:
    """Build a pod with `make_pod(**pod_kwargs)` and poll it until the mean return of the last
    `window` finished episodes reaches `target_return` (with at least `window` episodes, as the
    run monitor's stop rule), or `total_env_steps`, or `time_limit_s`.

    `schedule_env_steps` is the algorithm's `total_env_steps` (learning-rate annealing horizon);
    default `total_env_steps`. `torch_threads`, if given, is passed to `torch.set_num_threads`
    first (1 is fastest for CartPole-sized networks on a 2-core CPU).

    By default the pod reports after every poll (one read of the device each) and this loop
    decides. With `lock_step`, the pod decides itself (srl.workers.stop.LockStepStop, one update
    late, as `run.deterministic=true` does) and reports only every `report_interval_s`: the pod's
    iterations then never wait for the device (srl.workers.pod), as on a GPU they should.

        run = train_pod(target_return=475.0, seed=1, **pod_settings(load_config("cartpole-pod")))
    """
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    started = time.perf_counter()
    rules = StopRules(total_env_steps, target_return, time_limit_s=time_limit_s, window=window)
    lock = LockStepStop(rules) if lock_step else None  # the pod decides (no time limit there)
    kernel = make_pod(total_env_steps=schedule_env_steps or total_env_steps, stop=lock, **pod_kwargs)
    episodes = ReturnWindow(window)
    env_steps = updates = 0
    history: list[tuple[int, float, float | None]] = []
    stop: Stop | None = None
    try:
        kernel.start()
        last_report = time.perf_counter()
        while True:
            polled = kernel.poll()
            if lock is not None and polled and time.perf_counter() - last_report < report_interval_s:
                continue
            last_report = time.perf_counter()
            r = kernel.report()
            env_steps += r[Key.ENV_STEPS]
            updates += r[Key.UPDATES]
            episodes.add(r[Key.EPISODE_RETURNS], r[Key.EPISODE_LENGTHS], r[Key.EPISODES])
            mean = episodes.mean_return
            history.append((env_steps, time.perf_counter() - started, mean))
            if on_poll is not None:
                on_poll(kernel, episodes)
            if lock is not None:
                if not polled:
                    stop = lock.stop
                    break
                continue
            stop = rules.decide(updates, env_steps, time.perf_counter() - started, rules.target(mean, episodes.count))
            if stop is not None:
                break
        wall = time.perf_counter() - started
        final = kernel.finish()
        if lock is not None:  # the episodes of the last reads
            episodes.add(final[Key.EPISODE_RETURNS], final[Key.EPISODE_LENGTHS], final[Key.EPISODES])
            env_steps += final[Key.ENV_STEPS]
            updates += final[Key.UPDATES]
    finally:
        kernel.close()
    return PodRun(
        reached=stop is not None and stop.kind is StopKind.TARGET,
        stop_reason="" if stop is None else stop.reason,
        env_steps=env_steps,
        wall_time_s=wall,
        return_mean=episodes.mean_return,
        episodes=episodes.count,
        updates=updates,
        final=final,
        kernel=kernel,
        history=history,
    )


# ------------------------------------------------------------------ checks that need CUDA (tests/test_pod_gpu.py)


def graphs_against_eager(polls: int = 8, seed: int = 1, device: str = "cuda", experiment: str = "cartpole-pod-gpu") -> dict[str, Any]:
    """The same pod (seed, settings) with `pod.cuda_graphs` off and on: its parameters and
    report after `polls` iterations, as JSON-able lists (the gpu test compares them). The eager
    iterations after the first run under torch.cuda.set_sync_debug_mode("error"): any op that
    waits for the device there raises, naming itself."""
    from srl.config.load import load_config

    settings = pod_settings(load_config(experiment, ["run.run_dir=/nonexistent"]))
    settings["total_env_steps"] = settings.pop("schedule_env_steps")
    out: dict[str, Any] = {}
    for graphs in ("off", "on"):
        kernel = make_pod(seed=seed, device=device, cuda_graphs=graphs, **settings)
        for k in range(polls):
            strict = graphs == "off" and k > 0
            if strict:
                torch.cuda.set_sync_debug_mode("error")
            try:
                kernel.poll()
            finally:
                if strict:
                    torch.cuda.set_sync_debug_mode("default")
        report = kernel.report()
        out[graphs] = {"params": [p.detach().double().cpu().flatten().tolist() for p in kernel.policy.parameters()],
                       "report": {k: v for k, v in report.items() if not k.endswith("_time_s")},
                       "captured": kernel._graphs is not None}
        kernel.close()
    return out


def main(argv: list[str] | None = None) -> None:
    """`python -m srl.testing.pod graphs|reach [--device D] [--seed S]`: one JSON line (run by the
    gpu tests in a process of their own, as CUDA wants)."""
    import argparse
    import json

    from srl.config.load import load_config

    parser = argparse.ArgumentParser()
    parser.add_argument("check", choices=["graphs", "reach"])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--experiment", default="cartpole-pod-gpu")
    parser.add_argument("--polls", type=int, default=8)
    args = parser.parse_args(argv)
    if args.check == "graphs":
        print(json.dumps(graphs_against_eager(args.polls, args.seed, args.device, args.experiment)))
        return
    config = load_config(args.experiment, ["run.run_dir=/nonexistent", f"pod.device={args.device}"])
    run = train_pod(total_env_steps=config.stop.total_env_steps, target_return=475.0, seed=args.seed,
                    device=args.device, lock_step=True, report_interval_s=0.1, **pod_settings(config))
    print(json.dumps({**run.summary(), "graphs": run.kernel._graphs is not None}))


if __name__ == "__main__":
    main()
