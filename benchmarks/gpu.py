"""srl on a GPU, part by part, with Sample Factory on the same GPU beside it: the figures of the GPU
issue (docs/benchmarks.md, "GPUs").

    python benchmarks/gpu.py                                   # every part, on cuda
    python benchmarks/gpu.py --parts env inference --device cpu --seconds 0.2   # a smoke run anywhere
    python benchmarks/gpu.py --parts pong --sf-python python3 --sf-path /tmp/sfsite

Parts (`--parts`, in this order):

* **env**: batched torch CartPole (srl.envs.batched) stepped on `--device`, env steps/s per batch
  size (`--num-envs`), the median of `--repeats` (benchmarks/batched_env_speed.py's loop).
* **inference**: the policy worker's acting path (srl.workers.policy.Acting: observations of a
  batch to the device, the forward pass, actions and values back into the slots), per batch size
  (`--batches`) for pong-ppo's Nature CNN and cartpole-ppo's MLP, eager and, on CUDA, replayed as
  CUDA graphs (devices.policy_graphs=on): median and 90th-percentile latency of one batch, rows/s,
  and the issue's targets (CNN <= 0.5 ms at 64 rows and <= 2.5 ms at 1,024, MLP <= 0.15 ms at 1
  row). A batch is one slot, or with `--rows-per-slot R` N / R slots (pinned as a policy worker
  pins them), as when a policy worker answers that many actors at once. `--inference-seconds`
  per batch size and mode.
* **pod**: `srl run cartpole-pod-gpu` on a CUDA `--device` (CUDA graphs on), and `srl run
  cartpole-pod` on the CPU, seeds `--pod-seeds`: launch to 475, and the pod worker's own wall time
  (its stepping and training, start-up left out); then the steady state in this process
  (benchmarks/pod_gpu.py) of those and of the eager CUDA pod (`pod.cuda_graphs=off`): per-iteration
  time and env steps/s with training, kernels and launch calls per iteration (torch.profiler), the
  GPU's busy share. About 100 s on an H200 with seeds 1-3.
* **pong**: the machine's env limit (`--limit-procs` raw preprocessed Pong processes at once,
  benchmarks/sampling_vs_limit.py), then for each of `--workers` (8 and 16) PPO training
  throughput on Pong, srl (`pong-ppo` with that many actors, one policy worker, trainer and policy
  worker on `--device`, with its workers' busy seconds) against Sample Factory 2.1.1 APPO
  (`--device=gpu`, with its components' busy seconds from its own profile) with the same envs,
  workers and batch, each for `--pong-seconds` (Sample Factory also stops at `--sf-steps`), one
  after the other; each rate leaves start-up out (benchmarks/peers). Sample Factory runs with
  `--sf-python`, `--sf-path` put first on its PYTHONPATH (where its gymnasium < 1.0 and numpy < 2
  live); where it cannot be imported it is reported missing. A pair that would end past
  `--budget-s` is skipped and said so.

The JSON line also carries `lscpu`'s summary (model, cores, threads, NUMA nodes, caches).

Progress goes to stderr; standard output gets ONE JSON line of figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "peers"))

import srl_side  # noqa: E402
from batched_env_speed import batched_steps_per_s  # noqa: E402
from common import REPO, machine_info, ratio, repo_first_path, run_child  # noqa: E402

PARTS = ("env", "inference", "pod", "pong")
INFERENCE_EXPERIMENTS = ("pong-ppo", "cartpole-ppo")


def log(msg: str) -> None:
    print(f"[gpu] {msg}", file=sys.stderr, flush=True)


def env_speed(device: torch.device, sizes: list[int], seconds: float, repeats: int) -> dict[str, Any]:
    by_n: dict[int, list[float]] = {n: [] for n in sizes}
    for r in range(repeats):
        for n in sizes:
            by_n[n].append(batched_steps_per_s(n, seconds, device, seed=r))
            log(f"env: {n} envs, repeat {r + 1}: {by_n[n][-1]:,.0f} env steps/s")
    per_n = {str(n): {"env_steps_per_s": round(statistics.median(v)), "repeats": [round(x) for x in v]}
             for n, v in by_n.items()}
    best = max(per_n, key=lambda n: per_n[n]["env_steps_per_s"])
    return {"env": "CartPole-v1", "by_num_envs": per_n, "best_num_envs": int(best),
            "best_env_steps_per_s": per_n[best]["env_steps_per_s"], "seconds_per_repeat": seconds}


def acting_for(experiment: str, device: torch.device, graphs: str = "off") -> tuple[Any, Any]:
    """The experiment's policy on `device` in an Acting (fixed weights; `graphs`: devices.policy_graphs),
    and its graph."""
    from srl.config.load import load_config
    from srl.graph import build_graph, initial_policy
    from srl.streams.params import FixedParams
    from srl.workers.policy import Acting

    # inline: this process may have initialised CUDA already, which a local launch refuses (no run starts here)
    graph = build_graph(load_config(experiment, ["monitor.display=off", "launch.launcher=inline"]))
    return Acting(initial_policy(graph, device), FixedParams(), graphs=graphs), graph


def slot_of(graph: Any, rows: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One inference slot of `rows` rows, observations filled with random values of their dtype."""
    slot = {name: np.zeros((rows, *spec.shape), spec.dtype) for name, spec in graph.slot_fields().items()}
    slot["version"] = np.zeros(1, np.int64)
    for name, array in slot.items():
        if name.startswith("obs"):
            array[:] = rng.integers(0, 256, array.shape) if array.dtype == np.uint8 else rng.normal(size=array.shape)
    return slot


# the acting latency targets, ms per batch: experiment -> rows -> ms (docs/benchmarks.md, "GPUs")
LATENCY_TARGETS_MS = {"pong-ppo": {64: 0.5, 1024: 2.5}, "cartpole-ppo": {1: 0.15}}


def acting_modes(device: torch.device) -> dict[str, str]:
    """Acting's modes to time: eager everywhere, graphed (devices.policy_graphs=on) on CUDA only,
    since on the CPU acting is the same plain path either way."""
    return {"eager": "off", "graphed": "on"} if device.type == "cuda" else {"eager": "off"}


def batch_latencies(acting: Any, slots: list[dict[str, np.ndarray]], seconds: float) -> list[float]:
    """Seconds per call of `acting` on `slots`, timed for `seconds` (at least 5 calls) after a warm-up."""
    from srl.streams.inference import Request

    requests = [Request(a, 0) for a in range(len(slots))]
    for _ in range(5):  # warm-up: kernels chosen, allocator filled, a graph captured
        acting(slots, requests)
    latencies = []
    deadline = time.perf_counter() + seconds
    while (start := time.perf_counter()) < deadline or len(latencies) < 5:
        acting(slots, requests)
        latencies.append(time.perf_counter() - start)
    return latencies


def inference_speed(device: torch.device, batches: list[int], seconds: float, rows_per_slot: int = 0,
                    experiments: tuple[str, ...] = INFERENCE_EXPERIMENTS) -> dict[str, Any]:
    """Acting's latency per batch of N rows, eager and (on CUDA) graphed: one slot of N rows, or
    (`rows_per_slot`) N / that many slots, as a policy worker answers that many actors at once."""
    out: dict[str, Any] = {}
    rng = np.random.default_rng(0)
    for experiment in experiments:
        for mode, graphs in acting_modes(device).items():
            acting, graph = acting_for(experiment, device, graphs)
            per_batch, pinned = {}, []  # slots stay alive while registered (unregistered by close)
            for rows in batches:
                per_slot = min(rows, rows_per_slot or rows)
                sizes = [per_slot] * (rows // per_slot) + ([rows % per_slot] if rows % per_slot else [])
                slots = [slot_of(graph, size, rng) for size in sizes]
                pinned.append(slots)
                if hasattr(acting, "pin"):
                    acting.pin(slots)  # as the policy worker does with its slots
                latencies = batch_latencies(acting, slots, seconds)
                median_s = statistics.median(latencies)
                per_batch[str(rows)] = {"latency_ms_median": round(median_s * 1e3, 4),
                                        "latency_ms_p90": round(float(np.percentile(latencies, 90)) * 1e3, 4),
                                        "rows_per_s": round(rows / median_s), "batches_timed": len(latencies),
                                        "slots": len(slots)}
                log(f"inference {experiment} {mode}: {rows} rows: {per_batch[str(rows)]}")
            if hasattr(acting, "close"):
                acting.close()
            entry = out.setdefault(experiment, {"policy": graph.config.policy})
            entry["by_batch_rows" if mode == "eager" else f"{mode}_by_batch_rows"] = per_batch
            entry.setdefault("graphed_in_use", {})[mode] = bool(getattr(acting, "graphed", False))
        out[experiment]["targets"] = latency_targets(experiment, out[experiment])
    return out


def latency_targets(experiment: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Each target of LATENCY_TARGETS_MS that was measured: the target, each mode's median, met or not."""
    met: dict[str, Any] = {}
    for rows, target_ms in LATENCY_TARGETS_MS.get(experiment, {}).items():
        measured = {key.removesuffix("by_batch_rows").rstrip("_") or "eager": value[str(rows)]["latency_ms_median"]
                    for key, value in entry.items() if key.endswith("by_batch_rows") and str(rows) in value}
        if measured:
            met[str(rows)] = {"target_ms": target_ms, **{f"{m}_ms": v for m, v in measured.items()},
                              "met": min(measured.values()) <= target_ms}
    return met


def srl_run(experiment: str, overrides: list[str], timeout_s: float) -> dict[str, Any]:
    """`srl run` in a session of its own (as a user starts it; killed whole on a timeout or Ctrl-C,
    as the peers' runs are); its summary.json's figures, as srl_side.train reads its metrics."""
    with tempfile.TemporaryDirectory(prefix="srl-gpu-") as tmp:
        cmd = [sys.executable, "-m", "srl.cli", "run", experiment, "monitor.display=off", f"run.run_dir={tmp}/run",
               *overrides]
        started = time.monotonic()
        done = run_child(cmd, timeout_s, env={"PYTHONPATH": repo_first_path()}, cwd=REPO)
        summary_path = Path(tmp) / "run" / "summary.json"
        if not summary_path.exists():
            return {"error": done.get("error", "no summary.json")}
        summary = json.loads(summary_path.read_text())
    pod_wall = summary.get("time_breakdown", {}).get("pod:0", {}).get("wall")
    return {"launch_to_exit_s": round(time.monotonic() - started, 2), "time_to_target_s": summary.get("time_to_target_s"),
            "pod_worker_wall_s": pod_wall, "env_steps": summary.get("env_steps"), "stop_reason": summary.get("stop_reason"),
            "error": summary.get("error"), "devices": summary.get("devices")}


def pod_times(device: str, seeds: list[int]) -> dict[str, Any]:
    """The pod part: `srl run` to 475 (seeds `seeds`; launch to the target and the pod worker's
    wall, medians) and the steady state in this process (benchmarks/pod_gpu.py: per-iteration
    time with training, kernels per iteration, busy share): on a CUDA `device` cartpole-pod-gpu
    with its CUDA graphs on and off; on the CPU cartpole-pod, the CPU's preset."""
    from pod_gpu import steady_state

    # (name, experiment, device, pod.cuda_graphs, runs to 475?, timed steady-state iterations): the eager
    # CUDA pod is only timed (75 ms an iteration on an H200: its runs to 475 took 35 s more)
    variants: list[tuple[str, str, str, str, bool, int]] = []
    if device.startswith("cuda"):
        variants += [("cuda_graphs", "cartpole-pod-gpu", device, "on", True, 300),
                     ("cuda_eager", "cartpole-pod-gpu", device, "off", False, 30)]
    variants.append(("cpu", "cartpole-pod", "cpu", "off", True, 60))
    out: dict[str, Any] = {}
    for name, experiment, dev, graphs, to_target, iterations in variants:
        out[name] = {"experiment": experiment, "device": dev, "cuda_graphs": graphs}
        if to_target:
            runs = []
            for seed in seeds:
                runs.append(srl_run(experiment, [f"run.seed={seed}", f"pod.device={dev}", f"pod.cuda_graphs={graphs}"],
                                    timeout_s=300))
                log(f"pod {name} ({experiment}), seed {seed}: {runs[-1]}")
            reached = [r for r in runs if r.get("time_to_target_s") is not None]  # the others say why not
            walls = [r["pod_worker_wall_s"] for r in reached if r.get("pod_worker_wall_s") is not None]
            targets = [r["time_to_target_s"] for r in reached]
            launches = [r["launch_to_exit_s"] for r in reached]
            out[name].update(runs=runs, pod_worker_wall_s_median=statistics.median(walls) if walls else None,
                             time_to_target_s_median=statistics.median(targets) if targets else None,
                             launch_to_exit_s_median=statistics.median(launches) if launches else None)
        try:  # the steady state, in this process (its own pod)
            out[name]["steady_state"] = steady_state(dev, graphs, experiment, iterations=iterations)
        except Exception as e:  # noqa: BLE001  (the runs' figures stand without it)
            out[name]["steady_state"] = {"error": f"{type(e).__name__}: {e}"}
        log(f"pod {name}: steady state {out[name]['steady_state']}")
    return out


def pong_side_by_side(device: str, workers: int, seconds: float, sf_python: str, sf_path: str | None,
                      sf_steps: int) -> dict[str, Any]:
    """srl's pong-ppo and Sample Factory's APPO with the same workers, envs and batch on the GPU.

    srl: `workers` actors of 8 envs, segments of 8 envs x 128 steps, `workers` segments per update
    (4 epochs of 4 minibatches, pong-ppo's), for `seconds` (stop.time_limit_s); its summary's
    worker_busy_s says who set the pace. Sample Factory: `workers` rollout workers of 8 envs in 2
    splits (its double buffering), rollouts of 128, the same batch in 4 minibatches, 4 epochs, for
    `seconds` or `sf_steps` env steps, whichever ends first; its own profile (sf_log.txt) gives its
    components' busy seconds."""
    per_update = workers * 8 * 128
    srl_overrides = [f"launch.num_actor_workers={workers}", "dataflow.inference=policy_worker",
                     f"dataflow.batch_segments={workers}", f"devices.trainer={device}", f"devices.policy={device}",
                     f"stop.time_limit_s={seconds}"]
    log(f"pong: srl, {workers} workers, {seconds} s")
    srl = srl_side.train("pong", 100_000_000, timeout_s=seconds + 120, overrides=srl_overrides)
    log(f"  -> {srl}")
    sf_args = ["--device=gpu" if device.startswith("cuda") else "--device=cpu", f"--num_workers={workers}",
               "--num_envs_per_worker=8", "--worker_num_splits=2", "--rollout=128",
               f"--batch_size={per_update // 4}", "--num_batches_per_epoch=4", "--num_epochs=4",
               f"--train_for_seconds={int(seconds)}"]
    path = os.pathsep.join([p for p in (sf_path, str(HERE / "peers")) if p])
    missing = sample_factory_missing(sf_python, path)
    if missing:
        sf: dict[str, Any] = {"missing": missing}
    else:
        log(f"pong: sample factory, {workers} workers, {seconds} s or {sf_steps} env steps")
        sf = run_child([sf_python, str(HERE / "peers" / "sf_peer.py"), "train", "pong", str(sf_steps)], seconds + 120,
                       env={"PYTHONPATH": path, "PEER_SF_ARGS": json.dumps(sf_args)})
    log(f"  -> {sf}")
    return {"workers": workers, "env_steps_per_update": per_update, "seconds": seconds,
            "srl": srl, "srl_overrides": srl_overrides, "srl_worker_busy_s": (srl.get("summary") or {}).get("worker_busy_s"),
            "sample_factory": sf, "sample_factory_args": sf_args,
            "srl_over_sample_factory": ratio(srl.get("env_steps_per_s"), sf.get("env_steps_per_s"))}


def sample_factory_missing(sf_python: str, path: str) -> str | None:
    """Why Sample Factory cannot run with `sf_python` (None where it can): a missing install is
    reported, not raised."""
    probe = subprocess.run([sf_python, "-c", "import sample_factory"], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": path}, check=False)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["import failed"])[-1]


def env_limit(procs: int, seconds: float) -> dict[str, Any]:
    """The machine's env limit for Pong: `procs` raw preprocessed Pong processes stepping at once
    (benchmarks/sampling_vs_limit.py), summed env steps/s."""
    from sampling_vs_limit import machine_limit

    log(f"pong: env limit, {procs} raw processes, {seconds} s")
    rate = machine_limit("ALE/Pong-v5", procs, seconds)
    log(f"  -> {rate:,.0f} env steps/s")
    return {"procs": procs, "seconds": seconds, "env_steps_per_s": round(rate)}


def pong_parts(args: argparse.Namespace, deadline: float, clock: Any = time.monotonic) -> dict[str, Any]:
    """The env limit, then srl against Sample Factory at each of `args.workers`, each run only
    while the budget (`deadline`) has room for it."""
    out: dict[str, Any] = {}
    if args.limit_procs:
        out["env_limit"] = env_limit(args.limit_procs, args.limit_seconds)
    # one side's run: its seconds plus start-up (about 15 s for srl, more for Sample Factory)
    for workers in args.workers:
        if clock() + 2 * (args.pong_seconds + 20) > deadline:
            out[f"workers_{workers}"] = {"skipped": "--budget-s has no room left for it"}
            continue
        side = pong_side_by_side(args.device, workers, args.pong_seconds, args.sf_python, args.sf_path, args.sf_steps)
        limit = (out.get("env_limit") or {}).get("env_steps_per_s")
        side["srl_over_env_limit"] = ratio(side["srl"].get("env_steps_per_s"), limit)
        out[f"workers_{workers}"] = side
    return out


def lscpu() -> dict[str, Any]:
    """The CPU as `lscpu` names it: model, sockets, cores, threads, NUMA nodes, caches."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    return parse_lscpu(text)


LSCPU_KEYS = ("Architecture", "Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "Socket(s)",
              "NUMA node(s)", "CPU max MHz", "L2 cache", "L3 cache", "Hypervisor vendor", "Flags")


def parse_lscpu(text: str) -> dict[str, Any]:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in LSCPU_KEYS and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    if "Flags" in fields:  # the whole list is long: the ones that matter to torch's CPU kernels
        fields["Flags"] = " ".join(f for f in fields["Flags"].split() if f.startswith(("avx", "amx")))
    return fields


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"device": str(device), "torch": torch.__version__}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    multiprocessors=props.multi_processor_count, cuda=torch.version.cuda)
    return info


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_part(part: str, args: argparse.Namespace, device: torch.device, result: dict[str, Any], deadline: float) -> None:
    """One part's figures into `result`; an error in it is recorded, and the next part runs."""
    started = time.monotonic()
    try:
        if part == "env":
            result[part] = env_speed(device, args.num_envs, args.seconds, args.repeats)
        elif part == "inference":
            result[part] = inference_speed(device, args.batches, args.inference_seconds or args.seconds, args.rows_per_slot)
        elif part == "pod":
            result[part] = pod_times(args.device, args.pod_seeds)
        else:
            result[part] = pong_parts(args, deadline)
    except Exception as e:  # noqa: BLE001  (one broken part must not take the others' figures down)
        result[part] = {"error": f"{type(e).__name__}: {e}"}
    finally:
        result.setdefault("part_wall_s", {})[part] = round(time.monotonic() - started, 1)
        log(f"{part} done in {result['part_wall_s'][part]} s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4096, 65536, 1 << 20, 1 << 23, 1 << 25])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 64, 256, 1024, 4096])
    parser.add_argument("--rows-per-slot", type=int, default=0,
                        help="inference: split each batch into slots of this many rows (0: one slot)")
    parser.add_argument("--seconds", type=float, default=1.0, help="timed wall time per env size / inference batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pod-seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--inference-seconds", type=float, default=0.0,
                        help="inference: timed wall time per batch size and mode (0: --seconds)")
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 16],
                        help="Pong: srl's actors and Sample Factory's rollout workers, one pair of runs for each")
    parser.add_argument("--pong-seconds", type=float, default=40.0, help="Pong: each side's run (start-up not counted)")
    parser.add_argument("--sf-steps", type=int, default=2_000_000,
                        help="Pong: Sample Factory's env-step budget, if it ends before --pong-seconds")
    parser.add_argument("--limit-procs", type=int, default=16, help="Pong: raw env processes for the env limit (0: none)")
    parser.add_argument("--limit-seconds", type=float, default=10.0)
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="whole run: a Pong pair that would end past it is skipped (and said so)")
    parser.add_argument("--sf-python", default=sys.executable)
    parser.add_argument("--sf-path", default=None, help="put first on Sample Factory's PYTHONPATH")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    device = torch.device(args.device)
    deadline = time.monotonic() + args.budget_s
    result: dict[str, Any] = {"benchmark": "gpu", **device_info(device), **machine_info(), "lscpu": lscpu()}
    try:  # Ctrl-C, or SIGTERM run as a script: the parts measured so far are still printed
        for part in args.parts:
            run_part(part, args, device, result, deadline)
    except KeyboardInterrupt:
        result["interrupted"] = True
        log("interrupted: printing the parts measured so far")
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupted)  # `timeout`, a batch system: stop as on Ctrl-C
    main()
