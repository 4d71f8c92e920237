"""srl's fetchreach-sac-her against Stable-Baselines3 SAC + HER with rl-baselines3-zoo's FetchReach
settings, side by side on this machine: wall time until the greedy evaluation reaches the target.

Criterion, both sides: the mean return of one evaluation round (10 deterministic episodes) is at
least --target (-5: FetchReach's return is minus the steps spent away from the goal, of 50; a
policy at -5 reaches the goal within a few steps and stays there, which is what the zoo's
success rate of 1.0 measures at the episode's last step; SB3's side also reports is_success).
srl's evaluator runs beside the learner (every eval.interval_s); SB3's EvalCallback every
--eval-every env steps, inside the training loop. Each side stops there or at the budget (the
zoo's n_timesteps, 20k env steps). Per seed srl runs first and SB3 right after, so drift in the
machine's load hits both; both are timed from their launch (interpreter start and imports count).

    python benchmarks/her_vs_sb3.py --seeds 1 2 3          # ~4-8 min per seed on 2 quiet cores
    python benchmarks/her_vs_sb3.py --only srl --seeds 1

Both sides use the python running this script (stable-baselines3 and gymnasium-robotics installed;
gymnasium-robotics 1.4.2 needs mujoco < 3.12). Progress goes to stderr; standard output gets ONE
JSON line: each side's runs, the median time to target, and srl's speed-up over SB3.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cartpole_vs_sb3 as common  # child processes, their environment, machine info (same folder)

REPO = Path(__file__).resolve().parent.parent
SB3_SCRIPT = Path(__file__).resolve().parent / "_sb3_her.py"
EXPERIMENT = "fetchreach-sac-her"


def run_srl(seed: int, target: float, budget: int, cap_s: float, work: Path) -> dict[str, Any]:
    run_dir = work / f"srl-{seed}"
    cmd = [sys.executable, "-m", "srl.cli", "run", EXPERIMENT, f"run.seed={seed}", f"run.run_dir={run_dir}",
           f"stop.total_env_steps={budget}", "stop.target_on=eval", f"stop.target_return={target}",
           "eval.episodes=10", "monitor.display=off"]
    child = common.run_child(cmd, cwd=REPO, env=common._child_env(work), log_path=work / f"srl-{seed}.log", timeout_s=cap_s)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    reached = "reached by the evaluator" in str(summary.get("stop_reason", ""))
    return {"seed": seed, "reached": reached, "time_s": round(child["wall_s"], 2) if reached else None,
            "wall_s": round(child["wall_s"], 2), "env_steps": summary.get("env_steps"),
            "stop_reason": summary.get("stop_reason"), "timed_out": child["timed_out"]}


def run_sb3(seed: int, target: float, budget: int, cap_s: float, work: Path, threads: int | None = None) -> dict[str, Any]:
    log = work / f"sb3-{seed}.log"
    cmd = [sys.executable, str(SB3_SCRIPT), "--seed", str(seed), "--budget", str(budget), "--target", str(target),
           "--start-time", str(time.time()), *(["--torch-threads", str(threads)] if threads else [])]
    child = common.run_child(cmd, cwd=work, env=common._child_env(work), log_path=log, timeout_s=cap_s)
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"reached": False}
    return {"seed": seed, **result, "time_s": result.get("time_s") if result.get("reached") else None,
            "wall_s": round(child["wall_s"], 2), "timed_out": child["timed_out"]}


def _median(times: list[float | None]) -> float | None:
    done = [t for t in times if t is not None]
    return round(statistics.median(done), 2) if len(done) == len(times) and done else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--target", type=float, default=-5.0)
    p.add_argument("--budget", type=int, default=20_000, help="env steps per run, both sides (the zoo's n_timesteps)")
    p.add_argument("--cap-s", type=float, default=900.0, help="wall-time cap of one run")
    p.add_argument("--only", choices=["srl", "sb3"], default=None)
    p.add_argument("--sb3-torch-threads", type=int, default=None, help="torch threads for SB3 (default: torch's; "
                   "srl's workers use 1 each)")
    a = p.parse_args(argv)
    sides: dict[str, list[dict[str, Any]]] = {"srl": [], "sb3": []}
    with tempfile.TemporaryDirectory(prefix="her-vs-sb3-") as tmp:
        work = Path(tmp)
        for seed in a.seeds:
            if a.only in (None, "srl"):
                sides["srl"].append(run_srl(seed, a.target, a.budget, a.cap_s, work))
                common.log(f"srl seed {seed}: {sides['srl'][-1]}")
            if a.only in (None, "sb3"):
                sides["sb3"].append(run_sb3(seed, a.target, a.budget, a.cap_s, work, a.sb3_torch_threads))
                common.log(f"sb3 seed {seed}: {sides['sb3'][-1]}")
    report: dict[str, Any] = {
        "benchmark": "her_vs_sb3", "experiment": EXPERIMENT, "env": "FetchReach-v4", "target_eval_return": a.target,
        "budget_env_steps": a.budget, "machine": common.machine_info(),
        **{side: {"runs": runs, "median_time_to_target_s": _median([r["time_s"] for r in runs])}
           for side, runs in sides.items() if runs},
    }
    srl_t = report.get("srl", {}).get("median_time_to_target_s")
    sb3_t = report.get("sb3", {}).get("median_time_to_target_s")
    report["srl_speedup"] = round(sb3_t / srl_t, 2) if srl_t and sb3_t else None
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
