"""Sampling throughput against the number of actor workers, for an env whose step sleeps 5 ms.

    python benchmarks/scaling.py                                  # local launcher, 1..64 actors
    python benchmarks/scaling.py --launcher ray --actors 1 2 4 8 16
    python benchmarks/scaling.py --plot docs/scaling.png --from results.jsonl

Each point is `srl bench sampling` (random policy, a trainer that learns nothing, rate taken
over the run's last `--seconds`, after a start-up allowance that grows with the actor count) with `launch.num_actor_workers=N`, repeated; prints one JSON line
per launcher with the median env steps/s of each N. The ideal is linear, N / 5 ms: an actor steps
its envs one after another, but sleeping uses no CPU, so actors add up until the CPUs are busy
with everything else (inference, copies, the trainer, process switches).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])  # Ray workers
# Start-up before the measured window: every worker process imports torch (~1-2 s of CPU each,
# so 64 of them take a minute on 2 cores), and Ray adds its own actor start-up.
START_ALLOWANCE_S = {"local": (5.0, 1.0), "ray": (30.0, 1.5)}  # launcher -> (fixed, per actor worker)


def measure(launcher: str, actors: int, seconds: float, envs_per_actor: int, step_s: float,
            start_per_actor_s: float | None = None) -> float | None:  # fmt: skip
    from srl.bench import bench_sampling

    # the time limit counts from launch; the rate is taken over the run's last `seconds` only
    fixed_s, per_actor_s = START_ALLOWANCE_S[launcher]
    per_actor_s = per_actor_s if start_per_actor_s is None else start_per_actor_s
    limit_s = seconds + fixed_s + per_actor_s * actors
    result = bench_sampling("sleep", [
        "modules=sleep_env", f"launch.launcher={launcher}", f"launch.num_actor_workers={actors}", "dataflow.inference=inline",
        f"dataflow.envs_per_actor={envs_per_actor}", "dataflow.ring_splits=2", "dataflow.sample_length=32", "dataflow.segment_slots=2",
        f"stop.time_limit_s={limit_s}", f"env_kwargs.step_s={step_s}", "launch.heartbeat_timeout_s=300",
        "launch.ray_resources.actor.num_cpus=0", "launch.ray_resources.trainer.num_cpus=0",
    ], measure_last_s=seconds)  # fmt: skip
    if result["exit_code"] != 0 or not result["env_steps_per_s"]:
        print(f"# a run that did not get going (counted as null): {result}", file=sys.stderr, flush=True)
        return None
    return result["env_steps_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--launcher", choices=["local", "ray"], default="local")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured time per run")
    parser.add_argument("--envs-per-actor", type=int, default=4)
    parser.add_argument("--step-s", type=float, default=0.005)
    parser.add_argument("--start-per-actor-s", type=float,
                        help="start-up allowance per actor worker (default: local 1.0, ray 1.5; more on a loaded machine)")
    parser.add_argument("--plot", help="write a PNG of every JSON line in --from (needs matplotlib)")
    parser.add_argument("--from", dest="source", help="a file of this script's JSON lines, for --plot")
    args = parser.parse_args()
    if args.plot:
        lines = Path(args.source).read_text().splitlines()
        plot([json.loads(line) for line in lines if line.strip()], args.plot)
        return
    if args.launcher == "ray":
        import ray

        # one instance for every run; every role asks for no CPU (below), so the machine's count
        # is enough: Ray keeps an idle worker process per CPU, and 66 "CPUs" on 2 cores made 66
        # idle interpreters polling away the cores. PYTHONPATH above reaches the workers.
        ray.init(include_dashboard=False, num_cpus=os.cpu_count())
    rates = {}
    for n in args.actors:
        runs = [
            measure(args.launcher, n, args.seconds, args.envs_per_actor, args.step_s, args.start_per_actor_s)
            for _ in range(args.repeats)
        ]
        done = [r for r in runs if r is not None]
        rates[n] = {"median": statistics.median(done) if done else None, "runs": runs}
        print(f"# {args.launcher} actors={n}: {rates[n]}", file=sys.stderr, flush=True)
    per_actor = 1 / args.step_s  # an actor steps its envs one after another: sleeps add up
    print(json.dumps({
        "benchmark": "scaling", "launcher": args.launcher, "env_step_s": args.step_s,
        "envs_per_actor": args.envs_per_actor, "repeats": args.repeats, "measured_s": args.seconds,
        "ideal_steps_per_s_per_actor": per_actor,
        "env_steps_per_s": {str(n): r["median"] for n, r in rates.items()},
        "runs": {str(n): r["runs"] for n, r in rates.items()}, "cpus": os.cpu_count(),
    }))  # fmt: skip


def plot(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        points = [(int(n), v) for n, v in r["env_steps_per_s"].items() if v is not None]
        ax.plot(*zip(*points), "o-", label=f"{r['launcher']} launcher")
    top = max(int(n) for r in results for n in r["env_steps_per_s"])
    ideal = results[0]["ideal_steps_per_s_per_actor"]
    ax.plot([1, top], [ideal, ideal * top], "k--", label="ideal (no overhead)")
    ax.set(xscale="log", yscale="log", xlabel="actor workers", ylabel="env steps/s (median)",
           title=f"Sampling, env step sleeps {results[0]['env_step_s'] * 1000:g} ms")  # fmt: skip
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
