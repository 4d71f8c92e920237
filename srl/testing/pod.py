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
from srl.workers.pod import PodKernel, make_pod
from srl.workers.stop import Stop, StopKind, StopRules


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
    final: dict[str, Any]  # the kernel's finish() report of the last interval
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
            "params_sha256": self.final.get("params_sha256"),
        }


def train_pod(
    total_env_steps: int = 1_000_000,
    target_return: float | None = None,
    window: int = 100,
    time_limit_s: float | None = None,
    on_poll: Callable[[PodKernel, ReturnWindow], None] | None = None,
    schedule_env_steps: int | None = None,
    torch_threads: int | None = None,
    **pod_kwargs: Any,
) -> PodRun:
    """Build a pod with `make_pod(**pod_kwargs)` and poll it until the mean return of the last
    `window` finished episodes reaches `target_return` (with at least `window` episodes, as the
    run monitor's stop rule), or `total_env_steps`, or `time_limit_s`.

    `schedule_env_steps` is the algorithm's `total_env_steps` (learning-rate annealing horizon);
    default `total_env_steps`. `torch_threads`, if given, is passed to `torch.set_num_threads`
    first (1 is fastest for CartPole-sized networks on a 2-core CPU).

        run = train_pod(target_return=475.0, seed=1, **pod_settings(load_config("cartpole-pod")))
    """
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    started = time.perf_counter()
    kernel = make_pod(total_env_steps=schedule_env_steps or total_env_steps, **pod_kwargs)
    episodes = ReturnWindow(window)
    env_steps = updates = 0
    history: list[tuple[int, float, float | None]] = []
    rules = StopRules(total_env_steps, target_return, time_limit_s=time_limit_s, window=window)
    stop: Stop | None = None
    try:
        kernel.start()
        while True:
            kernel.poll()
            r = kernel.report()
            env_steps += r["env_steps"]
            updates += r["updates"]
            episodes.add(r["episode_returns"], r["episode_lengths"], r["episodes"])
            mean = episodes.mean_return
            history.append((env_steps, time.perf_counter() - started, mean))
            if on_poll is not None:
                on_poll(kernel, episodes)
            stop = rules.decide(updates, env_steps, time.perf_counter() - started, rules.target(mean, episodes.count))
            if stop is not None:
                break
        wall = time.perf_counter() - started
        final = kernel.finish()
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
