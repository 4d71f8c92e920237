"""Sampling speed of two srl trees side by side: a change's cost, measured in one run.

    git worktree add /tmp/before <commit>            # the tree before the change
    python benchmarks/before_after.py --before /tmp/before --repeats 7
    python benchmarks/before_after.py --before /tmp/before --envs CartPole-v1 --srl transport=tcp

For each env id, each repeat runs `srl bench sampling ID` (random policy, a trainer that learns
nothing) once with the `--before` tree's srl and once with this checkout's (`--after`), in turn,
the first of the pair alternating between repeats, so drift in the machine's load hits both
alike. `--srl` overrides go to both sides. Each side is a fresh `python -c` process whose `srl` is
imported from its tree (PYTHONPATH), with `time_limit_s=--seconds`.

Standard output gets ONE JSON line: per env, each side's env steps/s of every repeat and their
median, and `after_over_before`: the median of the pairs' ratios (a ratio per pair cancels the
drift that hits both runs of a pair), with its min and max.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

RUN = "import json, sys; from srl.bench import bench_sampling; print(json.dumps(bench_sampling(sys.argv[1], sys.argv[2:])))"


def sampling_rate(tree: Path, env_id: str, overrides: list[str], seconds: float) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, "-c", RUN, env_id, f"time_limit_s={seconds}", "display=off", *overrides]
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tree, timeout=seconds + 300)
    if proc.returncode != 0:
        raise RuntimeError(f"srl from {tree} failed on {env_id}:\n{proc.stderr[-3000:]}")
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(figures["env_steps_per_s"])


def compare(args: argparse.Namespace, env_id: str) -> dict:
    sides = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    rates: dict[str, list[float]] = {"before": [], "after": []}
    for repeat in range(args.repeats):
        order = ["before", "after"] if repeat % 2 == 0 else ["after", "before"]
        for side in order:
            rates[side].append(sampling_rate(sides[side], env_id, args.srl, args.seconds))
            print(f"{env_id} repeat {repeat} {side}: {rates[side][-1]:.0f} env steps/s", file=sys.stderr)
    ratios = [a / b for a, b in zip(rates["after"], rates["before"])]
    return {
        "before": {"tree": str(sides["before"]), "rates": rates["before"], "median": statistics.median(rates["before"])},
        "after": {"tree": str(sides["after"]), "rates": rates["after"], "median": statistics.median(rates["after"])},
        "after_over_before": round(statistics.median(ratios), 4),
        "ratio_min": round(min(ratios), 4),
        "ratio_max": round(max(ratios), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the srl tree before the change (a git worktree)")
    parser.add_argument("--after", default=str(Path(__file__).resolve().parent.parent), help="default: this checkout")
    parser.add_argument("--envs", nargs="+", default=["CartPole-v1", "ALE/Pong-v5"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=8.0, help="time_limit_s of each run")
    parser.add_argument("--srl", nargs="*", default=[], help="key=value overrides for both sides")
    args = parser.parse_args()
    results = {env_id: compare(args, env_id) for env_id in args.envs}
    print(json.dumps({
        "benchmark": "before_after", "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "repeats": args.repeats, "seconds": args.seconds, "overrides": args.srl, "envs": results,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
