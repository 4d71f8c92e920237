"""srl's tuned experiments (srl/experiments/tuned.py) against Stable-Baselines3 with
rl-baselines3-zoo's hyperparameters, side by side on this machine: wall time to the zoo's
published score for each env.

Criterion, both sides: the mean return of the last 100 finished *training* episodes reaches the
target (the zoo's published score, benchmark.md; srl's own 0.9 for DoorKey-8x8, where the zoo has
none). Each side stops there or at the env's fixed env-step budget (the zoo's n_timesteps; 3M for
LunarLander, whose training window passes 242 after the zoo's 1M: srl/experiments/tuned.py), and
every run is killed at a wall-time cap. For each env and seed, srl runs first and SB3 right after,
so drift in the machine's load hits both alike; both are timed from their launch (interpreter
start and imports count).

    python benchmarks/tuned_vs_sb3.py --sb3-python /work/sb3venv/bin/python             # the cheap four
    python benchmarks/tuned_vs_sb3.py --sb3-python PY --envs LunarLander-v3 --seeds 1 2 3
    python benchmarks/tuned_vs_sb3.py --only srl --envs Hopper-v5 --cap-s 600

SB3 runs in its own virtualenv, whose python `--sb3-python` names (torch==2.13.0 first, then
stable-baselines3 gymnasium box2d mujoco minigrid). Progress goes to stderr; standard output
gets ONE JSON line per env, as soon as its seeds are done.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cartpole_vs_sb3 as common  # the child-process, metrics and machine helpers (same folder)

REPO = Path(__file__).resolve().parent.parent
SB3_SCRIPT = Path(__file__).resolve().parent / "_sb3_tuned.py"
WINDOW = 100
CRITERION = "mean return of the last 100 training episodes"


@dataclass(frozen=True)
class Bench:
    experiment: str  # srl's
    target: float  # the zoo's score (DoorKey-8x8: srl's own bar)
    budget: int  # env steps, both sides
    cap_s: float  # wall-time cap of one run
    zoo_algorithm: str


# cheapest first; the zoo's scores as in srl/experiments/tuned.py
BENCHES: dict[str, Bench] = {
    "MountainCarContinuous-v0": Bench("mountaincar-continuous-sac", 94.679, 150_000, 1200, "sac"),  # zoo: 50k, see tuned.py
    "LunarLander-v3": Bench("lunarlander-ppo", 242.119, 3_000_000, 3600, "ppo"),  # the zoo's 1M: see tuned.py
    "MiniGrid-DoorKey-8x8-v0": Bench("minigrid-doorkey8-ppo", 0.9, 2_000_000, 1500, "ppo"),
    "LunarLanderContinuous-v3": Bench("lunarlander-continuous-sac", 260.390, 500_000, 3600, "sac"),
    "BipedalWalker-v3": Bench("bipedalwalker-ppo", 213.299, 5_000_000, 3600 * 2, "ppo"),
    "Hopper-v5": Bench("hopper-ppo", 2410.435, 2_000_000, 3600, "ppo"),  # the zoo: 1M; both sides get srl's 2M
}
CHEAP = ["MountainCarContinuous-v0", "LunarLander-v3", "MiniGrid-DoorKey-8x8-v0", "LunarLanderContinuous-v3"]


def log(msg: str) -> None:
    print(f"[tuned_vs_sb3] {msg}", file=sys.stderr, flush=True)


def _last_return(path: Path) -> tuple[float | None, int | None]:
    """The last report's mean return and env steps in an srl metrics.jsonl."""
    last = common.parse_srl_metrics(path, target=float("inf"), window=WINDOW)["last"] or {}
    ret, steps = last.get("episode_return_mean"), last.get("env_steps")
    return (float(ret) if isinstance(ret, (int, float)) else None, int(steps) if isinstance(steps, (int, float)) else None)


def run_srl(env: str, bench: Bench, seed: int, cap_s: float, budget: int, workdir: Path) -> dict[str, Any]:
    run_dir = workdir / f"srl-{bench.experiment}-seed{seed}"
    cmd = [sys.executable, "-m", "srl.cli", "run", bench.experiment, f"run.seed={seed}", f"run.run_dir={run_dir}",
           f"stop.total_env_steps={budget}", f"stop.target_return={bench.target!r}", "monitor.display=plain",
           f"stop.time_limit_s={max(cap_s - 30, 0.9 * cap_s):g}"]  # srl stops itself before the parent's kill
    child_env = common._child_env(workdir)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), child_env.get("PYTHONPATH", "")) if p)
    log_path = workdir / f"srl-{bench.experiment}-seed{seed}.log"
    log(f"srl {env} run.seed={seed}: {' '.join(cmd)}")
    proc = common.run_child(cmd, cwd=REPO, env=child_env, log_path=log_path, timeout_s=cap_s)
    parsed = common.parse_srl_metrics(run_dir / "metrics.jsonl", target=bench.target, window=WINDOW)
    summary = None
    with contextlib.suppress(OSError, ValueError):
        summary = json.loads((run_dir / "summary.json").read_text())
    started = (summary or {}).get("started_unix_s")
    interpreter_s = started - proc["launch"] if started else 0.0  # srl's time_s counts from its first line
    final_return, final_steps = _last_return(run_dir / "metrics.jsonl")
    result = {
        "seed": seed, "reached": parsed["reached"],
        "time_s": round(parsed["time_s"] + interpreter_s, 3) if parsed["time_s"] is not None else None,
        "env_steps": parsed["env_steps"], "final_return_mean": final_return, "total_env_steps": final_steps,
        "launch_to_exit_s": round(proc["wall_s"], 3), "returncode": proc["returncode"],
        "timed_out": proc["timed_out"],
    }
    if proc["returncode"] not in (0, None) and not proc["timed_out"]:
        result["log_tail"] = common._tail(log_path, 1500)
    log(f"srl {env} run.seed={seed}: {_said(result)}")
    return result


def run_sb3(env: str, bench: Bench, seed: int, cap_s: float, budget: int, workdir: Path, py: Path,
            torch_threads: int | None) -> dict[str, Any]:
    log_path = workdir / f"sb3-{env}-seed{seed}.log"
    cmd = [str(py), str(SB3_SCRIPT), "--env", env, "--seed", str(seed), "--budget", str(budget),
           "--target", repr(bench.target), "--window", str(WINDOW), "--start-time", repr(time.time())]
    if torch_threads:
        cmd += ["--torch-threads", str(torch_threads)]
    log(f"sb3 {env} run.seed={seed}")
    proc = common.run_child(cmd, cwd=workdir, env=common._child_env(workdir), log_path=log_path, timeout_s=cap_s)
    out: dict[str, Any] = {}
    for line in reversed(common._tail(log_path, 20000).splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out = json.loads(line)
                break
    if not out:  # killed at the cap: the last progress line says where it was
        out = _progress_of(common._tail(log_path, 4000))
    result = {
        "seed": seed, "reached": bool(out.get("reached")), "time_s": out.get("time_s"),
        "env_steps": out.get("env_steps"), "final_return_mean": out.get("final_return_mean"),
        "total_env_steps": out.get("total_env_steps"), "launch_to_exit_s": round(proc["wall_s"], 3),
        "returncode": proc["returncode"], "timed_out": proc["timed_out"], "torch_threads": out.get("torch_threads"),
        "sb3_version": out.get("sb3_version"),
    }
    if proc["returncode"] not in (0, None) and not proc["timed_out"]:
        result["log_tail"] = common._tail(log_path, 1500)
    log(f"sb3 {env} run.seed={seed}: {_said(result)}")
    return result


def _progress_of(text: str) -> dict[str, Any]:
    """{"total_env_steps", "final_return_mean"} from the child's last `steps=N ... return_mean=R` line."""
    for line in reversed(text.splitlines()):
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        with contextlib.suppress(KeyError, ValueError):
            return {"total_env_steps": int(fields["steps"]), "final_return_mean": float(fields["return_mean"])}
    return {}


def _said(r: dict[str, Any]) -> str:
    got = f"reached in {r['time_s']:.1f} s, {r['env_steps']} env steps" if r["reached"] else "not reached"
    return (f"{got}; final mean-100 return {r['final_return_mean']} after {r['total_env_steps']} steps, "
            f"launch to exit {r['launch_to_exit_s']:.1f} s (rc={r['returncode']}, timed_out={r['timed_out']})")


def _median_time(runs: list[dict[str, Any]]) -> float | None:
    """Median time to target, a run that never got there counted as slower than all."""
    if not runs:
        return None
    m = statistics.median([r["time_s"] if r["reached"] else float("inf") for r in runs])
    return None if m == float("inf") else round(m, 3)


def _side(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "median_time_to_target_s": _median_time(runs),
        "reached": sum(r["reached"] for r in runs), "of": len(runs),
        "time_to_target_s": [r["time_s"] for r in runs],
        "env_steps_to_target": [r["env_steps"] for r in runs],
        "final_return_mean": [r["final_return_mean"] for r in runs],
        "total_env_steps": [r["total_env_steps"] for r in runs],
        "launch_to_exit_s": [r["launch_to_exit_s"] for r in runs],
        "runs": runs,
    }


def env_report(env: str, bench: Bench, srl_runs: list[dict], sb3_runs: list[dict], args: argparse.Namespace,
               budget: int, cap_s: float, machine: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "tuned_vs_sb3", "env": env, "srl_experiment": bench.experiment,
        "zoo_algorithm": bench.zoo_algorithm, "zoo_score": None if env.startswith("MiniGrid") else bench.target,
        "target_return": bench.target, "criterion": CRITERION, "env_step_budget": budget, "cap_s": cap_s,
        "seeds": args.seeds, "srl_commit": common._git_commit(), "machine": machine,  # its load: at the env's start
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    if args.only in (None, "srl"):
        report["srl"] = _side(srl_runs)
    if args.only in (None, "sb3"):
        report["sb3"] = _side(sb3_runs)
    srl_t = report.get("srl", {}).get("median_time_to_target_s")
    sb3_t = report.get("sb3", {}).get("median_time_to_target_s")
    report["ratio_sb3_over_srl"] = round(sb3_t / srl_t, 3) if srl_t and sb3_t else None
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--envs", nargs="+", default=CHEAP, choices=list(BENCHES), help="default: the four cheapest")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--only", choices=["srl", "sb3"], default=None, help="run one side only")
    ap.add_argument("--sb3-python", type=Path, default=None, help="python of the SB3 virtualenv")
    ap.add_argument("--cap-s", type=float, default=None, help="wall-time cap of each run (default: the env's)")
    ap.add_argument("--budget", type=int, default=None, help="env-step budget (default: the env's, the zoo's)")
    ap.add_argument("--sb3-torch-threads", type=int, default=None, help="torch threads for SB3 (default: torch's)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run dirs and logs here (default: a temp dir)")
    args = ap.parse_args(argv)
    if args.only != "srl" and (args.sb3_python is None or not args.sb3_python.exists()):
        ap.error("--sb3-python must name the SB3 virtualenv's python (or pass --only srl)")

    def on_sigterm(signum, frame):  # like Ctrl-C: the children's groups are ended on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    with tempfile.TemporaryDirectory(prefix="tuned_vs_sb3-") as tmp:
        workdir = Path(tmp) if args.keep is None else args.keep.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        try:
            for env in args.envs:
                bench = BENCHES[env]
                budget, cap_s = args.budget or bench.budget, args.cap_s or bench.cap_s
                machine = common.machine_info()
                srl_runs, sb3_runs = [], []
                for seed in args.seeds:  # interleaved: srl, then SB3, for each seed
                    if args.only in (None, "srl"):
                        srl_runs.append(run_srl(env, bench, seed, cap_s, budget, workdir))
                    if args.only in (None, "sb3"):
                        sb3_runs.append(run_sb3(env, bench, seed, cap_s, budget, workdir, args.sb3_python,
                                                args.sb3_torch_threads))
                report = env_report(env, bench, srl_runs, sb3_runs, args, budget, cap_s, machine)
                print(json.dumps(report), flush=True)
        except KeyboardInterrupt:
            log("interrupted; child processes ended")
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
