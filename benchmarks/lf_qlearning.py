"""Lingua Franca's synchronized parallel Q-learning benchmark: time to train, srl against Ray.

The reactor-model RL paper (Lingua Franca) trains Q-learning with parallel workers in lock step
with a central learner and reports 31.2% less training time than Ray. Here N workers (default
4) each step their own FrozenLake 8x8 (not slippery); every lock-step each worker brings one
transition, the learner applies them in worker order to a tabular Q (benchmarks/_lfq_tabular.py,
the same rule on both sides), and the workers act epsilon-greedily on the new table. Training
stops when the mean return of the last 100 finished episodes (all workers) reaches the target.

* `ray`: N Ray actors, each one env; per lock-step the driver sends the table to every actor and
  calls `ray.get` once on their N transitions, then updates. Timed from `ray.init` (the runtime's
  start) to the target, and from the actors' first step (`ray_loop`).
* `srl`: `srl run lf-qlearning` in deterministic mode (`run.deterministic=true`: each update takes one
  segment from every actor, segment n acted by version n), N actor processes with inline
  inference, the tabular algorithm in the trainer; `summary.json`'s `time_to_target_s`, timed
  from the launch (worker processes start inside it).

Start-up (Ray's runtime, srl's processes) weighs a lot on a small, loaded machine, so each side's
lock-step rate inside the training loop is reported too (`loop_lock_steps_per_s`: Ray from its
first step to the target, srl between its first and last metrics reports).

Each run is a child process of its own; the kinds alternate (ray, srl, ray, srl, ...) so drift in
the machine's load hits both alike, and the medians go in ONE JSON line on stdout. Then srl runs
twice more for a fixed number of updates, to show the deterministic side's result is identical
(same `params_sha256`); the Ray driver's result is checked the same way.

    python benchmarks/lf_qlearning.py                    # 4 workers, 3 repeats
    python benchmarks/lf_qlearning.py --workers 8 --repeats 5
"""

from __future__ import annotations

import argparse
import hashlib
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

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def log(msg: str) -> None:
    print(f"[lf_qlearning] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ one run per child process


def run_ray(workers: int, seed: int, lock_steps: int | None) -> dict[str, Any]:
    """Train until the target (or for exactly `lock_steps` lock-steps)."""
    import _lfq_tabular as T
    import numpy as np
    import ray

    from srl.monitor.episodes import ReturnWindow

    launched = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    @ray.remote
    class Worker:
        def __init__(self, index: int) -> None:
            import gymnasium as gym

            self.env = gym.make(T.ENV_ID, **T.ENV_KWARGS)
            self.obs, _ = self.env.reset(seed=seed * 1000 + index)
            self.rng = np.random.default_rng(seed * 1000 + index)
            self.episode_return, self.episode_length = 0.0, 0

        def step(self, q: np.ndarray) -> tuple:
            s = int(self.obs)
            a = T.epsilon_greedy(q[s], T.EPSILON, self.rng)
            s2, r, terminated, truncated, _ = self.env.step(a)
            self.episode_return += float(r)
            self.episode_length += 1
            finished = None  # (return, length) of the episode this step ended
            if terminated or truncated:
                finished = (self.episode_return, self.episode_length)
                self.episode_return, self.episode_length = 0.0, 0
                self.obs, _ = self.env.reset()
            else:
                self.obs = s2
            return (s, a, float(r), int(s2), bool(terminated or truncated)), finished

    try:
        actors = [Worker.remote(i) for i in range(workers)]
        q = np.full((64, 4), T.Q_INIT)  # FrozenLake 8x8: 64 states, 4 actions
        window, steps = ReturnWindow(100), 0
        first = time.perf_counter()
        while lock_steps is None or steps < lock_steps:
            results = ray.get([a.step.remote(q) for a in actors])  # the one synchronization per step
            if steps == 0:
                first = time.perf_counter()  # every actor is up and has stepped once
            steps += 1
            T.q_update(q, [t for t, _ in results], T.ALPHA, T.GAMMA)
            ended = [f for _, f in results if f is not None]
            window.add([ret for ret, _ in ended], [length for _, length in ended])
            if lock_steps is None and window.count >= 100 and window.mean_return >= T.TARGET:
                break
        done = time.perf_counter()
        return {"time_to_target_s": done - launched, "loop_to_target_s": done - first, "lock_steps": steps,
                "loop_lock_steps_per_s": (steps - 1) / max(done - first, 1e-9),
                "env_steps": steps * workers, "q_sha256": hashlib.sha256(q.tobytes()).hexdigest()}
    finally:
        ray.shutdown()


def run_srl(workers: int, seed: int, lock_steps: int | None) -> dict[str, Any]:
    import _lfq_tabular  # noqa: F401  (registers the experiment)

    from srl.config.load import load_config
    from srl.launch.run import run_experiment

    with tempfile.TemporaryDirectory(prefix="lfq-srl-") as run_dir:
        budget = [f"stop.max_updates={lock_steps}", "stop.target_return=null"] if lock_steps else []
        config = load_config("lf-qlearning", [
            "modules=[_lfq_tabular]", f"launch.num_actor_workers={workers}", f"run.seed={seed}", f"run.run_dir={run_dir}",
            "monitor.display=off", "monitor.learning_curve=false", "launch.heartbeat_timeout_s=120", *budget,
        ])  # fmt: skip
        code = run_experiment(config)
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
        rate = loop_rate(Path(run_dir) / "metrics.jsonl", workers)
    if code != 0:
        raise RuntimeError(f"srl run failed: {summary.get('error') or summary.get('stop_reason')}")
    return {"time_to_target_s": summary["time_to_target_s"], "lock_steps": summary["updates"],
            "loop_lock_steps_per_s": rate,
            "env_steps": summary["env_steps"], "params_sha256": summary["params_sha256"]}


def loop_rate(metrics_path: Path, workers: int) -> float | None:
    """Lock-steps per second between the first and the last report that saw env steps (start-up
    and the first report's delay excluded), comparable to Ray's loop rate."""
    reports = [json.loads(line) for line in metrics_path.read_text().splitlines()]
    stepping = [r for r in reports if r.get("env_steps", 0) > 0]
    if len(stepping) < 2 or stepping[-1]["time_s"] <= stepping[0]["time_s"]:
        return None
    steps = (stepping[-1]["env_steps"] - stepping[0]["env_steps"]) / workers
    return steps / (stepping[-1]["time_s"] - stepping[0]["time_s"])


RUNS = {"ray": run_ray, "srl": run_srl}


def child(kind: str, workers: int, seed: int, lock_steps: int | None) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--child", kind, "--workers", str(workers), "--seed", str(seed)]
    if lock_steps:
        cmd += ["--lock-steps", str(lock_steps)]
    paths = [str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        log(f"{kind} failed:\n{proc.stderr[-3000:]}")
        return None
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    log(f"{kind}: {result}")
    return result


def median_of(runs: list[dict[str, Any] | None], key: str) -> float | None:
    values = [r[key] for r in runs if r is not None and r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fixed-lock-steps", type=int, default=300,
                        help="lock-steps of the two identical-result runs per side (0: skip)")
    parser.add_argument("--child", choices=sorted(RUNS), help=argparse.SUPPRESS)
    parser.add_argument("--lock-steps", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(RUNS[args.child](args.workers, args.seed, args.lock_steps)))
        return 0
    import _lfq_tabular as T
    import ray

    runs: dict[str, list] = {"ray": [], "srl": []}
    for r in range(args.repeats):
        for kind in ("ray", "srl"):
            log(f"repeat {r + 1}/{args.repeats}: {kind}")
            runs[kind].append(child(kind, args.workers, args.seed, None))
    same: dict[str, Any] = {}
    if args.fixed_lock_steps:
        for kind, key in (("srl", "params_sha256"), ("ray", "q_sha256")):
            pair = [child(kind, args.workers, args.seed, args.fixed_lock_steps) for _ in range(2)]
            hashes = [p[key] if p else None for p in pair]
            same[kind] = {"lock_steps": args.fixed_lock_steps, "hashes": hashes,
                          "identical": hashes[0] is not None and hashes[0] == hashes[1]}
    medians = {k: median_of(v, "time_to_target_s") for k, v in runs.items()}
    print(json.dumps({
        "benchmark": "lf_qlearning",
        "setup": {"env": T.ENV_ID, "env_kwargs": T.ENV_KWARGS, "workers": args.workers, "epsilon": T.EPSILON,
                  "alpha": T.ALPHA, "gamma": T.GAMMA, "q_init": T.Q_INIT, "target_return_mean_100": T.TARGET,
                  "seed": args.seed, "repeats": args.repeats},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "loadavg_at_end": list(os.getloadavg())},
        "ray_version": ray.__version__,
        "runs": runs,
        "time_to_target_median_s": medians,
        "ray_loop_to_target_median_s": median_of(runs["ray"], "loop_to_target_s"),
        "loop_lock_steps_per_s_median": {k: median_of(v, "loop_lock_steps_per_s") for k, v in runs.items()},
        "lock_steps_median": {k: median_of(v, "lock_steps") for k, v in runs.items()},
        "ratio_ray_over_srl": round(medians["ray"] / medians["srl"], 3) if all(medians.values()) else None,
        "identical_result": same,
        "paper_lf_training_time_reduction_vs_ray": 0.312,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
