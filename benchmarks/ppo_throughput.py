"""PPO training throughput: env steps consumed per second by the trainer, CartPole and Pong.

Each case is a built-in experiment run with a fixed budget of trainer updates (`max_updates`,
no target return), `--repeats` times. The rate is the trainer's consumed env steps
(`trained_env_steps` in metrics.jsonl) between the first report with an update and the last,
over the seconds between them: start-up (process launch, env construction, Atari resets) is
not counted. Launch-to-exit wall time is reported beside it.

    python benchmarks/ppo_throughput.py                             # cartpole-ppo and pong-ppo
    python benchmarks/ppo_throughput.py --cases cartpole-ppo --repeats 5
    python benchmarks/ppo_throughput.py --cases pong-ppo --set env_backend=envpool

Standard output gets ONE JSON line: per case the median rate, every repeat, the settings.
`ppo_throughput(experiment, overrides)` is the function a side-by-side script can call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from srl.config.load import load_config
from srl.launch.run import run_experiment

# Short fixed budgets: CartPole 200 updates x 512 env steps; Pong 4 updates x 1024 (a Nature-CNN
# PPO update of 4 epochs x 4 minibatches takes seconds on a CPU core).
CASES: dict[str, list[str]] = {
    "cartpole-ppo": ["stop.max_updates=200"],
    "pong-ppo": ["stop.max_updates=4", "launch.heartbeat_timeout_s=300"],
}
COMMON = ["stop.target_return=null", "stop.total_env_steps=1000000000", "monitor.display=off", "monitor.log_interval_s=0.5",
          "monitor.learning_curve=false", "run.checkpoint_interval_s=3600"]


def ppo_throughput(experiment: str, overrides: list[str]) -> dict[str, Any]:
    """One run of `experiment` with `overrides`: trainer env steps per second after start-up."""
    with tempfile.TemporaryDirectory(prefix="srl-ppo-tp-") as tmp:
        config = load_config(experiment, [*COMMON, *overrides, f"run.run_dir={Path(tmp) / 'run'}"])
        launched = time.perf_counter()
        code = run_experiment(config)
        wall_s = time.perf_counter() - launched
        lines = [json.loads(x) for x in (Path(tmp) / "run" / "metrics.jsonl").read_text().splitlines()]
    first = next((x for x in lines if x["updates"] > 0), None)
    last = lines[-1]
    if code != 0 or first is None or last["time_s"] <= first["time_s"]:
        raise RuntimeError(f"{experiment}: exit code {code}, {len(lines)} reports, too short to measure")
    consumed = last["trained_env_steps"] - first["trained_env_steps"]
    return {
        "trained_env_steps_per_s": round(consumed / (last["time_s"] - first["time_s"]), 1),
        "trained_env_steps": last["trained_env_steps"],
        "updates": last["updates"],
        "sampled_env_steps": last["env_steps"],
        "launch_to_exit_s": round(wall_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", nargs="*", default=[], help="extra overrides for every case (key=value)")
    args = parser.parse_args()
    if args.repeats < 3:
        parser.error("--repeats must be >= 3 (medians)")
    results: dict[str, Any] = {}
    for case in args.cases:
        runs = []
        for repeat in range(args.repeats):
            try:
                runs.append(ppo_throughput(case, [*CASES[case], *args.set]))
            except (RuntimeError, ImportError) as error:  # e.g. no ale-py: report, go on
                results[case] = {"failed": str(error)}
                break
            print(f"[ppo_throughput] {case} repeat {repeat + 1}: {runs[-1]}", file=sys.stderr, flush=True)
        else:
            rates = [r["trained_env_steps_per_s"] for r in runs]
            results[case] = {"trained_env_steps_per_s_median": statistics.median(rates), "runs": runs,
                             "overrides": [*CASES[case], *args.set]}
    print(json.dumps({"benchmark": "ppo_throughput", "repeats": args.repeats, "cpus": os.cpu_count(),
                      "loadavg_at_end": [round(x, 2) for x in os.getloadavg()], "results": results}))


if __name__ == "__main__":
    main()
