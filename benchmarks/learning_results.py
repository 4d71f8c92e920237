"""Env steps and wall time to an experiment's target return, over seeds: the figures of docs/results.md.

    python benchmarks/learning_results.py cartpole-appo --seeds 1 2 3
    python benchmarks/learning_results.py acrobot-ppo eval.episodes=5 --seeds 1 2 3   # overrides before the options

Each seed is one `srl run EXPERIMENT run.seed=N` child process (timed from its launch, imports
included) in a temporary run dir; `--keep DIR` keeps the run dirs (learning_curve.png,
metrics.jsonl). Progress goes to stderr; standard output gets ONE JSON line with the medians.
A seed that misses the target counts as slower than every seed that reached it, so a median that
lands on a miss is null (a median of the hits alone would hide the misses).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_seed(experiment: str, seed: int, run_dir: Path, overrides: list[str], timeout_s: float) -> dict:
    command = [sys.executable, "-m", "srl.cli", "run", experiment, f"run.seed={seed}", f"run.run_dir={run_dir}",
               "monitor.display=off", *overrides]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started = time.time()
    try:
        subprocess.run(command, env=env, timeout=timeout_s, stdout=subprocess.DEVNULL, stderr=sys.stderr, check=False)
    except subprocess.TimeoutExpired:
        return {"seed": seed, "reached": False, "stop_reason": "timeout", "wall_time_s": round(time.time() - started, 2)}
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "seed": seed,
        "reached": summary["stop_reason"].startswith("target_return"),
        "env_steps": summary["env_steps"],
        "wall_time_s": round(time.time() - started, 2),
        "time_to_target_s": summary.get("time_to_target_s"),  # the run's own clock, from its start
        "return_mean": summary["episode_return_mean"],
        "stop_reason": summary["stop_reason"],
    }


def median_counting_misses(runs: list[dict], key: str) -> float | None:
    """Median of `key` over all runs, a run that missed the target being slower than any hit;
    None when the median lands on a miss."""
    values = [r[key] if r["reached"] else math.inf for r in runs]
    median = statistics.median(values) if values else math.inf
    return None if math.isinf(median) else median


def git_commit() -> str | None:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip() or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides (before the options)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--keep", type=Path, help="keep each run dir as DIR/EXPERIMENT-sN")
    args = parser.parse_args()

    load_at_start = [round(x, 2) for x in os.getloadavg()]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for seed in args.seeds:
            result = run_seed(args.experiment, seed, base / f"{args.experiment}-s{seed}", args.overrides, args.timeout_s)
            print(json.dumps(result), file=sys.stderr)
            runs.append(result)
    print(json.dumps({
        "experiment": args.experiment,
        "overrides": args.overrides,
        "seeds": args.seeds,
        "srl_commit": git_commit(),
        "reached": sum(r["reached"] for r in runs),
        "median_env_steps": median_counting_misses(runs, "env_steps"),
        "median_wall_time_s": median_counting_misses(runs, "wall_time_s"),
        "runs": runs,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_at_start": load_at_start, "loadavg_at_end": [round(x, 2) for x in os.getloadavg()]},
    }))


if __name__ == "__main__":
    main()
