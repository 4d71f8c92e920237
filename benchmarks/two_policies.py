"""What a second policy costs: sampling speed of one env with one policy for every agent, and with
its agents split between two policies (config `policies`, srl.graph.lanes), side by side in one run.

    python benchmarks/two_policies.py                      # MPE simple_spread, 3 agents, 5 pairs of 20 s
    python benchmarks/two_policies.py --repeats 7 --seconds 30 --srl dataflow.inference=policy_worker

Each repeat runs `srl.bench.bench_sampling` (random policies, trainers that learn nothing) once with
one policy and once with two (agent_0 -> a, the others -> b), in turn, the first of a pair
alternating between repeats, so drift in the machine's load hits both alike. Standard output gets
ONE JSON line: each side's env steps/s per repeat and their median, and `two_over_one`: the median
of the pairs' ratios, with its min and max (the issue's bar: >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys

from srl.bench import bench_sampling

SPREAD = "env_kwargs={module: mpe2.simple_spread_v3, N: 3, max_cycles: 25, continuous_actions: false}"
TWO = ["policies={a: {}, b: {}}", "policy_mapping={agent_0: a, 'agent_*': b}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--srl", nargs="*", default=[], help="overrides for both sides (launch.num_actor_workers=2, ...)")
    args = parser.parse_args()
    common = [SPREAD, "launch.num_actor_workers=2", "dataflow.envs_per_actor=16", "dataflow.sample_length=25",
              f"stop.time_limit_s={args.seconds}", "monitor.display=off", *args.srl]
    sides = {"one": common, "two": common + TWO}
    rates: dict[str, list[float]] = {"one": [], "two": []}
    for repeat in range(args.repeats):
        for side in (["one", "two"] if repeat % 2 == 0 else ["two", "one"]):
            figures = bench_sampling("pettingzoo", sides[side])
            rates[side].append(float(figures["env_steps_per_s"]))
            print(f"repeat {repeat} {side}: {rates[side][-1]:.0f} env steps/s", file=sys.stderr)
    ratios = [t / o for t, o in zip(rates["two"], rates["one"])]
    print(json.dumps({
        "benchmark": "two_policies", "env": "mpe2.simple_spread_v3 (3 agents)", "overrides": common,
        "one": {"rates": rates["one"], "median": statistics.median(rates["one"])},
        "two": {"rates": rates["two"], "median": statistics.median(rates["two"])},
        "two_over_one": round(statistics.median(ratios), 4), "min": round(min(ratios), 4), "max": round(max(ratios), 4),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
