"""Lingua Franca's lock-step benchmark: 15 envs stepped together, srl against Ray actors.

The reactor-model RL paper (Lingua Franca) steps 15 environments in lock-step for 10,000 steps
with a random policy and compares with Ray (one actor per env, one `ray.get` per step for all
envs): Lingua Franca was 1.21x faster on Gym envs and 11.62x on Atari. Here, on the same
machine and in the same run, each timed over the stepping loop only (start-up excluded):

* `ray`: 15 Ray actors, each one `gymnasium.make(env)` stepping itself with a random action
  (auto-reset), the driver calling `ray.get([a.step.remote() for a in actors])` once per step.
* `srl_actor`: srl's actor env path, `srl.envs.make_vector_env(env, {}, 15)` in one process,
  stepped with a random action per env per step: all 15 advance together, every step.
* `srl_dataflow`: srl's deterministic dataflow (`deterministic=true`: each
  update takes one segment from every ring group, each acted by the previous version), 3 actor
  processes x 5 envs, inline random policy, the no-op trainer; its env-step rate between its
  first and last reports (`srl bench sampling`), converted to the time for 15 x steps.

Each measurement runs in its own child process (Ray's runtime and srl's forks never share one),
`--repeats` times; the medians and the ratios ray / srl go in ONE JSON line on stdout.

Ray (and ale-py for Atari) come from the current interpreter if it has them, else from a
virtualenv created on first use (`.bench/venv-ray`, with the system's site packages so srl's
own dependencies are shared), into which the script re-runs itself.

    python benchmarks/lf_lockstep.py                                  # CartPole-v1, + Pong if ale-py
    python benchmarks/lf_lockstep.py --steps 10000 --atari-steps 2000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".bench" / "venv-ray"
NUM_ENVS = 15
ATARI_ID = "ALE/Pong-v5"


def log(msg: str) -> None:
    print(f"[lf_lockstep] {msg}", file=sys.stderr, flush=True)


def _ensure_ray() -> None:
    """Re-run this script in a virtualenv with ray (and ale-py) unless this one has ray."""
    try:
        import ray  # noqa: F401
        return
    except ImportError:
        pass
    py = VENV / "bin" / "python"
    if not py.exists():
        log(f"creating {VENV} (system site packages) and installing ray, ale-py")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "ray"], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "ale-py"], check=False)  # Atari is optional
    os.execv(str(py), [str(py), *sys.argv])


def _make_gym(env_id: str) -> Any:
    import gymnasium as gym

    if env_id.startswith("ALE/"):
        import ale_py

        gym.register_envs(ale_py)
    return gym.make(env_id)


# ------------------------------------------------------------------ one measurement per child


def measure_ray(env_id: str, steps: int, repeats: int) -> list[float]:
    import ray

    ray.init(num_cpus=NUM_ENVS, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    @ray.remote
    class EnvActor:
        def __init__(self, seed: int) -> None:
            self.env = _make_gym(env_id)
            self.env.reset(seed=seed)
            self.env.action_space.seed(seed)

        def step(self) -> float:
            _, reward, terminated, truncated, _ = self.env.step(self.env.action_space.sample())
            if terminated or truncated:
                self.env.reset()
            return float(reward)

    try:
        actors = [EnvActor.remote(i) for i in range(NUM_ENVS)]
        ray.get([a.step.remote() for a in actors])  # every actor is up
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            for _ in range(steps):
                ray.get([a.step.remote() for a in actors])
            times.append(time.perf_counter() - started)
        return times
    finally:
        ray.shutdown()


def measure_srl_actor(env_id: str, steps: int, repeats: int) -> list[float]:
    import numpy as np

    if env_id.startswith("ALE/"):
        _make_gym(env_id)  # registers the ALE ids
    from srl.envs import make_vector_env

    env = make_vector_env(env_id, {}, NUM_ENVS)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n = int(env.action_space.n)
    times = []
    for _ in range(repeats):
        actions = rng.integers(0, n, size=(steps, env.num_rows))  # the random policy, drawn up front
        started = time.perf_counter()
        for t in range(steps):
            env.step(actions[t])
        times.append(time.perf_counter() - started)
    env.close()
    return times


def measure_srl_dataflow(env_id: str, steps: int, repeats: int) -> list[float]:
    from srl.bench import bench_sampling

    total = steps * NUM_ENVS
    # Atari frames travel as float32 (400 kB each): short segments keep the shared blocks small
    length = 8 if env_id.startswith("ALE/") else 32
    modules = ["modules=ale_py"] if env_id.startswith("ALE/") else []  # importing it registers ALE/ ids
    overrides = ["deterministic=true", "num_actor_workers=3", "envs_per_actor=5", "ring_splits=1",
                 "inference=inline", f"sample_length={length}", f"total_env_steps={total}", "time_limit_s=600",
                 *modules]
    times = []
    for _ in range(repeats):
        result = bench_sampling(env_id, overrides)
        if result["exit_code"] != 0 or not result["env_steps_per_s"]:
            raise RuntimeError(f"srl bench sampling failed: {result}")
        times.append(total / result["env_steps_per_s"])
    return times


MEASURES = {"ray": measure_ray, "srl_actor": measure_srl_actor, "srl_dataflow": measure_srl_dataflow}


def child(kind: str, env_id: str, steps: int, repeats: int) -> list[float] | None:
    cmd = [sys.executable, __file__, "--child", kind, "--env", env_id, "--steps", str(steps),
           "--repeats", str(repeats)]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        log(f"{kind} on {env_id} failed:\n{proc.stderr[-3000:]}")
        return None
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    log(f"{kind} {env_id}: {[round(t, 3) for t in times]} s for {steps} steps x {NUM_ENVS} envs")
    return times


def compare(env_id: str, steps: int, repeats: int, kinds: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"env": env_id, "steps": steps, "num_envs": NUM_ENVS}
    medians = {}
    for kind in kinds:
        times = child(kind, env_id, steps, repeats)
        out[f"{kind}_s"] = None if times is None else [round(t, 3) for t in times]
        medians[kind] = None if times is None else statistics.median(times)
        out[f"{kind}_median_s"] = None if times is None else round(medians[kind], 3)
    for kind in kinds:
        if kind != "ray" and medians.get(kind) and medians.get("ray"):
            out[f"ratio_ray_over_{kind}"] = round(medians["ray"] / medians[kind], 3)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=10_000, help="lock-steps of the Gym env (0: skip)")
    parser.add_argument("--atari-steps", type=int, default=10_000, help="lock-steps of the Atari game (0: skip)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--child", choices=sorted(MEASURES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(MEASURES[args.child](args.env, args.steps, args.repeats)))
        return 0
    _ensure_ray()
    import ray

    kinds = ["ray", "srl_actor", "srl_dataflow"]
    results = [] if args.steps <= 0 else [compare(args.env, args.steps, args.repeats, kinds)]
    try:
        import ale_py

        atari = ale_py.__version__
    except ImportError:
        atari = None
        log("ale-py is not installed: Atari skipped")
    if atari and args.atari_steps > 0:
        results.append(compare(ATARI_ID, args.atari_steps, args.repeats, kinds))
    print(json.dumps({
        "benchmark": "lf_lockstep",
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "loadavg_at_end": list(os.getloadavg())},
        "ray_version": ray.__version__, "ale_py_version": atari, "repeats": args.repeats,
        "paper_lf_over_ray": {"gym": 1.21, "atari": 11.62},
        "results": results,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
