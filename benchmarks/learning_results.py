"""Env steps and wall time to an experiment's target return, over seeds: the figures of docs/results.md.

    python benchmarks/learning_results.py cartpole-appo --seeds 1 2 3
    python benchmarks/learning_results.py acrobot-ppo eval.episodes=5 --seeds 1 2 3   # overrides before the options

Each seed is one `srl run EXPERIMENT run.seed=N` child process (timed from its launch, imports
included) in a temporary run dir; `--keep DIR` keeps the run dirs (learning_curve.png,
metrics.jsonl). Progress goes to stderr; standard output gets ONE JSON line with the medians.
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
        "return_mean": summary["episode_return_mean"],
        "stop_reason": summary["stop_reason"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides (before the options)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--timeout-s", type=float, default=600.0)
    parser.add_argument("--keep", type=Path, help="keep each run dir as DIR/EXPERIMENT-sN")
    args = parser.parse_args()

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        for seed in args.seeds:
            result = run_seed(args.experiment, seed, base / f"{args.experiment}-s{seed}", args.overrides, args.timeout_s)
            print(json.dumps(result), file=sys.stderr)
            runs.append(result)
    reached = [r for r in runs if r["reached"]]
    print(json.dumps({
        "experiment": args.experiment,
        "overrides": args.overrides,
        "seeds": args.seeds,
        "reached": len(reached),
        "median_env_steps": statistics.median(r["env_steps"] for r in reached) if reached else None,
        "median_wall_time_s": statistics.median(r["wall_time_s"] for r in reached) if reached else None,
        "runs": runs,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }))


if __name__ == "__main__":
    main()
