"""A pod's steady state on one device (benchmarks/gpu.py's pod part): per-iteration time and env
steps/s with training, kernels per iteration (torch.profiler) and the device's busy share.

    python benchmarks/pod_gpu.py --device cuda --graphs on     # one JSON line
    python benchmarks/pod_gpu.py --device cpu                   # a smoke run anywhere

One iteration = `sample_length` steps of every env (acting included), then one PPO update; the
pod warms up (and on CUDA captures its graphs) first, then `--iterations` are timed with one
device synchronisation at the end (the pod reads nothing back inside an iteration:
srl.workers.pod). `start_s` (the env's reset and the first act) and `warmup_and_capture_s` (the
WARMUP_ITERATIONS eager iterations, the capture and one replay) are the one-off costs that a run
to 475 pays besides its iterations. The profiler then records one more iteration: on CUDA the kernels the device
ran in it (graph-launched ones included), the host's launch calls (cudaLaunchKernel*,
cudaGraphLaunch, memcpy/memset), and the busy share = the kernels' summed device time over the
wall time of `--profile-iterations` iterations; on the CPU the aten ops run (the CPU's "kernels").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import torch

LAUNCH_CALLS = ("cudaLaunchKernel", "cudaGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync", "cuLaunchKernel")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def steady_state(device: str, graphs: str = "auto", experiment: str = "cartpole-pod-gpu", iterations: int = 200,
                 profile_iterations: int = 20, seed: int = 1, repeats: int = 3) -> dict[str, Any]:
    """Timed iterations of the experiment's pod on `device` (`graphs`: pod.cuda_graphs)."""
    from srl.config.load import load_config
    from srl.testing.pod import pod_settings
    from srl.workers.pod import WARMUP_ITERATIONS, make_pod

    dev = torch.device(device)
    config = load_config(experiment, ["run.run_dir=/nonexistent", "launch.launcher=inline"])
    settings = pod_settings(config)
    settings["total_env_steps"] = settings.pop("schedule_env_steps")
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads_for(trains=True))  # as `srl run` sets them (srl.launch.inline)
    kernel = make_pod(seed=seed, device=dev, cuda_graphs=graphs, **settings)
    per_iteration = kernel.T * kernel.env.num_envs
    try:
        started = time.perf_counter()
        kernel.start()
        _sync(dev)
        start_s = time.perf_counter() - started
        for _ in range(WARMUP_ITERATIONS + 1):  # warm-up, then capture (and one replay)
            kernel.poll()
        _sync(dev)
        warmup_s = time.perf_counter() - started - start_s
        kernel.report()
        times = []
        for _ in range(repeats):
            _sync(dev)
            started = time.perf_counter()
            for _ in range(iterations):
                kernel.poll()
            _sync(dev)
            times.append((time.perf_counter() - started) / iterations)
        kernel.report()  # (one read: the timed iterations did none)
        iteration_s = statistics.median(times)
        out: dict[str, Any] = {
            "device": str(kernel.device), "cuda_graphs": kernel._graphs is not None, "num_envs": kernel.env.num_envs,
            "sample_length": kernel.T, "env_steps_per_iteration": per_iteration,
            "start_s": round(start_s, 3), "warmup_and_capture_s": round(warmup_s, 3),
            "iteration_ms": round(iteration_s * 1e3, 4), "iteration_ms_repeats": [round(t * 1e3, 4) for t in times],
            "env_steps_per_s_with_training": round(per_iteration / iteration_s),
        }
        out.update(_profiled(kernel, dev, profile_iterations))
        out["torch_threads"] = torch.get_num_threads()
        return out
    finally:
        kernel.close()
        torch.set_num_threads(threads)


def _profiled(kernel: Any, device: torch.device, iterations: int) -> dict[str, Any]:
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    _sync(device)
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        for _ in range(iterations):
            kernel.poll()
        _sync(device)
        wall_s = time.perf_counter() - started
    events = prof.events()
    if device.type == "cuda":
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]
        launches = [e for e in events if e.device_type == DeviceType.CPU and e.name.startswith(LAUNCH_CALLS)]
        busy_us = sum(e.device_time if hasattr(e, "device_time") else e.cuda_time for e in kernels)
        return {"profiled_iterations": iterations, "cuda_kernels_per_iteration": round(len(kernels) / iterations, 1),
                "launch_calls_per_iteration": round(len(launches) / iterations, 1),
                "gpu_busy_share": round(busy_us / 1e6 / wall_s, 3), "profiled_wall_ms_per_iteration":
                round(wall_s * 1e3 / iterations, 3)}
    ops = [e for e in events if e.name.startswith("aten::")]
    return {"profiled_iterations": iterations, "aten_ops_per_iteration": round(len(ops) / iterations, 1)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--graphs", default="auto", choices=["auto", "on", "off"])
    parser.add_argument("--experiment", default="cartpole-pod-gpu")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--profile-iterations", type=int, default=20)
    args = parser.parse_args(argv)
    out = steady_state(args.device, args.graphs, args.experiment, args.iterations, args.profile_iterations)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
