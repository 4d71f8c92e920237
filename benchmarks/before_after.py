"""Sampling speed and time to target of two srl trees side by side: a change's cost, measured in one run.

    git worktree add /tmp/before <commit>            # the tree before the change
    python benchmarks/before_after.py --before /tmp/before --repeats 7
    python benchmarks/before_after.py --before /tmp/before --envs CartPole-v1 --srl dataflow.transport=tcp

For each env id, each repeat runs `srl bench sampling ID` (random policy, a trainer that learns
nothing) once with the `--before` tree's srl and once with this checkout's (`--after`), in turn,
the first of the pair alternating between repeats, so drift in the machine's load hits both
alike. `--srl` overrides go to both sides. Each side is a fresh `python -c` process whose `srl` is
imported from its tree (PYTHONPATH), with `stop.time_limit_s=--seconds`.

Standard output gets ONE JSON line: per env, each side's env steps/s of every repeat and their
median, and `after_over_before`: the median of the pairs' ratios (a ratio per pair cancels the
drift that hits both runs of a pair), with its min and max.

With `--time-to-target EXPERIMENT` (e.g. cartpole-ppo), each of `--seeds` also runs `srl run
EXPERIMENT run.seed=S` to its own stop on both trees, in turn as above, and the line gets
`time_to_target`: each side's summary.json `time_to_target_s` (launch to the target return; null
where a run stopped without reaching it), their medians, and the median of the per-seed ratios.
`--envs` with no id skips the sampling part.

With `--cpu-short S`, each side of a repeat also runs for S seconds, and the line gets
`cpu_after_over_before`: the ratio of env steps per CPU-second of all the run's processes,
(steps of the long run - steps of the short one) / (their CPU seconds' difference), which leaves
out start-up. On a machine that other work shares, this moves far less than steps per
wall-second (a process waiting for a core spends no CPU time): the figure to trust there.
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
from pathlib import Path

RUN = "import json, sys; from srl.bench import bench_sampling; print(json.dumps(bench_sampling(sys.argv[1], sys.argv[2:])))"


def sampling_run(tree: Path, env_id: str, overrides: list[str], seconds: float) -> tuple[dict, float]:
    """The bench's figures, and the CPU seconds of all its processes (the workers are its children)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", RUN, env_id, f"stop.time_limit_s={seconds}", "monitor.display=off", *overrides]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=tree, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"srl from {tree} failed on {env_id}:\n{err.read()[-3000:]}")
        figures = json.loads(out.read().strip().splitlines()[-1])
    return figures, usage.ru_utime + usage.ru_stime


def cpu_rate(tree: Path, env_id: str, args: argparse.Namespace, long: tuple[dict, float]) -> float:
    """Env steps per CPU-second, start-up left out (see the module doc)."""
    short = sampling_run(tree, env_id, args.srl, args.cpu_short)
    return (long[0]["env_steps"] - short[0]["env_steps"]) / (long[1] - short[1])


def compare(args: argparse.Namespace, env_id: str) -> dict:
    sides = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    rates: dict[str, list[float]] = {"before": [], "after": []}
    cpu: dict[str, list[float]] = {"before": [], "after": []}
    for repeat in range(args.repeats):
        order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
        for side in order:
            run = sampling_run(sides[side], env_id, args.srl, args.seconds)
            rates[side].append(float(run[0]["env_steps_per_s"]))
            if args.cpu_short is not None:
                cpu[side].append(cpu_rate(sides[side], env_id, args, run))
            print(f"{env_id} repeat {repeat} {side}: {rates[side][-1]:.0f} env steps/s", file=sys.stderr)
    ratios = [a / b for a, b in zip(rates["after"], rates["before"])]
    cpu_figures = {}
    if args.cpu_short is not None:
        cpu_figures = {
            "cpu_rates": {side: [round(x) for x in v] for side, v in cpu.items()},
            "cpu_after_over_before": round(statistics.median(a / b for a, b in zip(cpu["after"], cpu["before"])), 4),
        }
    return {
        "before": {"tree": str(sides["before"]), "rates": rates["before"], "median": statistics.median(rates["before"])},
        "after": {"tree": str(sides["after"]), "rates": rates["after"], "median": statistics.median(rates["after"])},
        "after_over_before": round(statistics.median(ratios), 4),
        "ratio_min": round(min(ratios), 4),
        "ratio_max": round(max(ratios), 4),
        **cpu_figures,
    }


def target_run(tree: Path, experiment: str, seed: int, overrides: list[str]) -> float | None:
    """Launch to target return of one `srl run` from `tree` (summary.json), None if not reached."""
    with tempfile.TemporaryDirectory(prefix="srl-before-after-") as tmp:
        args = [sys.executable, "-m", "srl.cli", "run", experiment, f"run.seed={seed}", f"run.run_dir={tmp}/run",
                "monitor.display=off", *overrides]
        proc = subprocess.run(args, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree, check=False,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"srl from {tree} failed on {experiment} seed {seed}:\n{proc.stderr[-3000:]}")
        return json.loads((Path(tmp) / "run" / "summary.json").read_text()).get("time_to_target_s")


def compare_target_times(args: argparse.Namespace) -> dict:
    sides = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    times: dict[str, list[float | None]] = {"before": [], "after": []}
    for i, seed in enumerate(args.seeds):
        for side in (["before", "after"] if i % 2 == 0 else ["after", "before"]):
            times[side].append(target_run(sides[side], args.time_to_target, seed, args.srl))
            print(f"{args.time_to_target} seed {seed} {side}: {times[side][-1]} s to target", file=sys.stderr)
    pairs = [(a, b) for a, b in zip(times["after"], times["before"]) if a is not None and b is not None]
    reached = {side: [t for t in v if t is not None] for side, v in times.items()}
    return {
        "experiment": args.time_to_target, "seeds": args.seeds, "seconds": times,
        "median": {side: statistics.median(v) if v else None for side, v in reached.items()},
        "after_over_before": round(statistics.median(a / b for a, b in pairs), 4) if pairs else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the srl tree before the change (a git worktree)")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parent.parent), help="default: this checkout")
    parser.add_argument("--envs", nargs="*", default=["CartPole-v1", "ALE/Pong-v5"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="time_limit_s of each run")
    parser.add_argument("--srl", nargs="*", default=[], help="key=value overrides for both sides")
    parser.add_argument("--cpu-short", type=float, default=None,
                        help="also measure env steps per CPU-second, against runs of this many seconds")
    parser.add_argument("--time-to-target", metavar="EXPERIMENT", help="also compare launch to target return")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="with --time-to-target")
    args = parser.parse_args()
    results = {env_id: compare(args, env_id) for env_id in args.envs}
    target = {"time_to_target": compare_target_times(args)} if args.time_to_target else {}
    print(json.dumps({
        "benchmark": "before_after", "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "repeats": args.repeats, "seconds": args.seconds, "overrides": args.srl, "envs": results, **target,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
