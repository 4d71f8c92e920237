"""Wall time to a target return: a tournament ensemble of pods against one pod, same compute.

Both sides get the same machine (K cores) and the same env-step budget: the ensemble runs K
member processes (`cartpole-pod-ensemble pod.ensemble.population=K`, one torch thread each), the
single pod runs `cartpole-pod` with `--pod-threads` torch threads (default 1: for a 32x32 MLP more
intra-op threads do not help, and on a loaded machine 2 threads made a seed 5x slower, past the
timeout) and the same `total_env_steps`. The question is then what the cores a single small pod
cannot use are worth when spent on a tournament. "Reached" is the same rule on both sides: the mean return of one pod's last 100
training episodes >= the target (for the ensemble: any member's). For each seed the pod runs and
then the ensemble, so drift in the machine's load hits both alike; times are from launch
(imports count), read from each run's summary.json (`time_to_target_s`).

    python benchmarks/ensemble_vs_pod.py                         # seeds 1 2 3, K = 2, CartPole 475
    python benchmarks/ensemble_vs_pod.py --population 4 --seeds 1 2 3 4 5

Progress goes to stderr; standard output gets ONE JSON line (medians over the seeds).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def log(msg: str) -> None:
    print(f"[ensemble_vs_pod] {msg}", file=sys.stderr, flush=True)


def run(experiment: str, overrides: list[str], timeout_s: float) -> dict[str, Any]:
    """One `srl run` in a child process; its summary.json (+ leaderboard facts for an ensemble)."""
    with tempfile.TemporaryDirectory(prefix="srl-ens-bench-") as tmp:
        cmd = [sys.executable, "-m", "srl.cli", "run", experiment, f"run.run_dir={tmp}/run", "monitor.display=off", *overrides]
        env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        started = time.time()
        try:
            proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=timeout_s)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            return {"reached": False, "time_to_target_s": None, "error": f"timeout {timeout_s} s"}
        summary_path = Path(tmp) / "run" / "summary.json"
        if code != 0 or not summary_path.is_file():
            return {"reached": False, "time_to_target_s": None, "error": (proc.stderr or "")[-2000:]}
        summary = json.loads(summary_path.read_text())
        out = {
            "reached": summary["time_to_target_s"] is not None,
            "time_to_target_s": summary["time_to_target_s"],
            "env_steps": summary["env_steps"],
            "launch_to_exit_s": round(time.time() - started, 2),
        }
        board = Path(tmp) / "run" / "leaderboard.json"
        if board.is_file():
            table = json.loads(board.read_text())
            out["replacements"] = len(table["replacements"])
            out["best_eval_return"] = table["entries"][0]["eval_return"] if table["entries"] else None
        return out


def median_time(runs: list[dict[str, Any]]) -> float | None:
    """Median time to the target; a run that did not get there counts as slower than all."""
    times = sorted(r["time_to_target_s"] if r["reached"] else float("inf") for r in runs)
    m = statistics.median_low(times) if len(times) % 2 == 0 else statistics.median(times)
    return None if m == float("inf") else round(m, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--population", type=int, default=2, help="ensemble members = cores given to each side")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--total-env-steps", type=int, default=2_000_000, help="budget of each side (all members)")
    parser.add_argument("--pod-threads", type=int, default=1, help="torch threads of the single pod")
    parser.add_argument("--ensemble-overrides", nargs="*", default=[],
                        help="extra key=value overrides of the ensemble, e.g. pod.ensemble.eval_episodes=0")
    parser.add_argument("--timeout-s", type=float, default=300.0)
    args = parser.parse_args()
    k = args.population
    common = [f"stop.target_return={args.target}", f"stop.total_env_steps={args.total_env_steps}"]
    pods, ensembles = [], []
    for seed in args.seeds:
        pods.append(run("cartpole-pod", [f"run.seed={seed}", f"launch.torch_threads={args.pod_threads}", *common], args.timeout_s))
        log(f"seed {seed} pod: {pods[-1]}")
        ensembles.append(
            run("cartpole-pod-ensemble", [f"run.seed={seed}", f"pod.ensemble.population={k}", *common, *args.ensemble_overrides], args.timeout_s)
        )
        log(f"seed {seed} ensemble: {ensembles[-1]}")
    pod_m, ens_m = median_time(pods), median_time(ensembles)
    result = {
        "benchmark": "ensemble_vs_pod",
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_at_end": list(os.getloadavg())},
        "experiment": "cartpole-pod vs cartpole-pod-ensemble",
        "population": k,
        "pod_torch_threads": args.pod_threads,
        "ensemble_overrides": args.ensemble_overrides,
        "target_return": args.target,
        "seeds": args.seeds,
        "pod_time_to_target_s": {"median": pod_m, "runs": [r["time_to_target_s"] for r in pods]},
        "ensemble_time_to_target_s": {"median": ens_m, "runs": [r["time_to_target_s"] for r in ensembles]},
        "ratio_pod_over_ensemble_median": round(pod_m / ens_m, 3) if pod_m and ens_m else None,
        "pod_env_steps": [r.get("env_steps") for r in pods],
        "ensemble_env_steps": [r.get("env_steps") for r in ensembles],
        "ensemble_replacements": [r.get("replacements") for r in ensembles],
        "ensemble_best_eval_return": [r.get("best_eval_return") for r in ensembles],
        "failures": [r["error"] for r in pods + ensembles if "error" in r],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
