"""Lingua Franca's lock-step benchmark: 15 envs stepped together, srl against Ray actors.

The reactor-model RL paper (Kwok, Lohstroh, Lee, arXiv:2312.04704) steps 15 environments in
lock-step with a random policy for 10,000 steps and compares with Ray (one actor per env, one
`ray.get` per step for all envs): Lingua Franca was 1.21x faster on Gym envs and 11.62x on
Atari. Its Atari code (github.com/jackyk02/parallel_rl_benchmarks, 4.Atari_Environments) makes
old-gym `Pong-v4` envs: raw 210x160x3 RGB frames, no preprocessing, each step's whole result
(frame included) sent back to the driver. Here, on the same machine and in the same run, each
timed over the stepping loop only (start-up excluded), with the same env settings on every side:

* `ray`: 15 Ray actors, each building its env and stepping it with a random action (auto-reset),
  returning (obs, reward, terminated, truncated) as the paper's actors do; the driver calls
  `ray.get([a.step.remote() for a in actors])` once per step.
* `srl_actor`: srl's actor env path, `srl.envs.make_vector_env(...)` of 15 envs in one process,
  stepped with a random action per env per step: all 15 advance together, every step.
* `srl_envpool` (Atari only): the same with `backend="envpool"`: EnvPool steps the 15 envs in
  its C++ threads (one per core) in one call per step; srl's `env_backend=envpool`.
* `srl_dataflow`: srl's deterministic dataflow (`run.deterministic=true`: each update takes one
  segment from every ring group, each acted by the previous version), 3 actor processes x 5
  envs, inline random policy, the no-op trainer; its env-step rate between its first and last
  reports (`srl bench sampling`), converted to the time for 15 x steps.

Atari settings (`--atari-obs`): `raw` (the paper's: `gymnasium.make("ALE/Pong-v5")`, 210x160x3
uint8 RGB, 4 frames per step, sticky actions 0.25; EnvPool: the same frame size, colour, skip
and stickiness, frames as [3, 210, 160]) or `preprocessed` (srl.envs.atari: 84x84 grey, 30
no-op starts, 4 frames max-pooled; EnvPool: srl's matching defaults). CartPole-v1 is gymnasium's.

Each measurement runs in its own child process (Ray's runtime and srl's forks never share one),
`--repeats` times; the medians and the ratios ray / srl go in ONE JSON line on stdout.

Ray (and ale-py for Atari) come from the current interpreter if it has them, else from a
virtualenv created on first use (`.bench/venv-ray`, with the system's site packages so srl's
own dependencies are shared), into which the script re-runs itself.

    python benchmarks/lf_lockstep.py                                  # CartPole-v1, + Pong if ale-py
    python benchmarks/lf_lockstep.py --steps 10000 --atari-steps 10000 --repeats 3 --atari-obs raw
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
ATARI_OBS = ("raw", "preprocessed")
# gymnasium's ALE/Pong-v5 as it comes (210x160 RGB, 4 frames a step, sticky actions 0.25, no
# no-op starts) in EnvPool's terms; EnvPool max-pools the last two of the 4 frames (gymnasium
# returns the last one) and gives [3, 210, 160] (gymnasium [210, 160, 3]): same bytes per frame;
# it draws 0 .. noop_max - 1 no-ops at reset, so noop_max 1 means none
RAW_ENVPOOL = {
    "img_height": 210, "img_width": 160, "gray_scale": False, "stack_num": 1, "frame_skip": 4,
    "repeat_action_probability": 0.25, "noop_max": 1, "reward_clip": False, "episodic_life": False,
    "use_fire_reset": False,
}


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


def _is_atari(env_id: str) -> bool:
    return env_id.startswith("ALE/")


def _make_gym(env_id: str, atari_obs: str) -> Any:
    """One env as Ray's actors step it: what srl_env(env_id, atari_obs) builds in srl, env for env."""
    import gymnasium as gym

    if not _is_atari(env_id):
        return gym.make(env_id)
    from srl.envs.atari import make_atari, register_atari

    register_atari()
    return make_atari(env_id) if atari_obs == "preprocessed" else gym.make(env_id)


def srl_env(env_id: str, atari_obs: str) -> tuple[str, dict[str, Any]]:
    """(srl env name, env_kwargs): raw Atari goes through srl's "gymnasium" factory, which makes
    `gymnasium.make(id)` as is; an ALE id itself gets srl's preprocessing (srl.envs.atari)."""
    if _is_atari(env_id) and atari_obs == "raw":
        return "gymnasium", {"id": env_id}
    return env_id, {}


def envpool_kwargs(atari_obs: str) -> dict[str, Any]:
    """EnvPool settings of the Atari env; srl's defaults match the preprocessed one."""
    threads = {"num_threads": os.cpu_count() or 1}  # EnvPool's threads step the envs: one per core
    return {**threads, **RAW_ENVPOOL} if atari_obs == "raw" else threads


# ------------------------------------------------------------------ one measurement per child


def measure_ray(env_id: str, steps: int, repeats: int, atari_obs: str) -> list[float]:
    import ray

    ray.init(num_cpus=NUM_ENVS, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    @ray.remote
    class EnvActor:
        def __init__(self, seed: int) -> None:
            self.env = _make_gym(env_id, atari_obs)
            self.env.reset(seed=seed)
            self.env.action_space.seed(seed)

        def step(self) -> tuple[Any, float, bool, bool]:
            # the observation goes back too, as in the paper: a learner needs it
            obs, reward, terminated, truncated, _ = self.env.step(self.env.action_space.sample())
            if terminated or truncated:
                obs = self.env.reset()[0]
            return obs, float(reward), bool(terminated), bool(truncated)

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


def measure_srl_actor(env_id: str, steps: int, repeats: int, atari_obs: str) -> list[float]:
    if _is_atari(env_id):
        from srl.envs.atari import register_atari

        register_atari()
    from srl.envs import make_vector_env

    name, kwargs = srl_env(env_id, atari_obs)
    return _step_lock_steps(make_vector_env(name, kwargs, NUM_ENVS), steps, repeats)


def measure_srl_envpool(env_id: str, steps: int, repeats: int, atari_obs: str) -> list[float]:
    from srl.envs import make_vector_env

    env = make_vector_env(env_id, envpool_kwargs(atari_obs), NUM_ENVS, backend="envpool")
    return _step_lock_steps(env, steps, repeats)


def _step_lock_steps(env: Any, steps: int, repeats: int) -> list[float]:
    """Seconds per repeat for `steps` steps of every env of `env` (a srl VectorEnv), random actions."""
    import numpy as np

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


def measure_srl_dataflow(env_id: str, steps: int, repeats: int, atari_obs: str) -> list[float]:
    from srl.bench import bench_sampling

    total = steps * NUM_ENVS
    name, kwargs = srl_env(env_id, atari_obs)
    # Atari frames travel as uint8 (a raw frame 100 kB): shorter segments keep the shared blocks small
    length = 16 if _is_atari(env_id) else 32
    atari = ["modules=ale_py", "launch.heartbeat_timeout_s=120"] if _is_atari(env_id) else []  # importing ale_py registers ALE/ ids
    overrides = ["run.deterministic=true", "launch.num_actor_workers=3", "dataflow.envs_per_actor=5", "dataflow.ring_splits=1",
                 "dataflow.inference=inline", f"dataflow.sample_length={length}", f"stop.total_env_steps={total}", "stop.time_limit_s=null",
                 *[f"env_kwargs.{k}={v}" for k, v in kwargs.items()], *atari]
    times = []
    for _ in range(repeats):
        result = bench_sampling(name, overrides)
        if result["exit_code"] != 0 or not result["env_steps_per_s"]:
            raise RuntimeError(f"srl bench sampling failed: {result}")
        times.append(total / result["env_steps_per_s"])
    return times


MEASURES = {"ray": measure_ray, "srl_actor": measure_srl_actor, "srl_envpool": measure_srl_envpool,
            "srl_dataflow": measure_srl_dataflow}


def child(kind: str, env_id: str, steps: int, repeats: int, atari_obs: str) -> list[float] | None:
    cmd = [sys.executable, __file__, "--child", kind, "--env", env_id, "--steps", str(steps),
           "--repeats", str(repeats), "--atari-obs", atari_obs]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        log(f"{kind} on {env_id} failed:\n{proc.stderr[-3000:]}")
        return None
    times = json.loads(proc.stdout.strip().splitlines()[-1])
    log(f"{kind} {env_id}: {[round(t, 3) for t in times]} s for {steps} steps x {NUM_ENVS} envs")
    return times


def compare(env_id: str, steps: int, repeats: int, kinds: list[str], atari_obs: str) -> dict[str, Any]:
    out: dict[str, Any] = {"env": env_id, "steps": steps, "num_envs": NUM_ENVS}
    if _is_atari(env_id):
        out["atari_obs"] = atari_obs
    medians = {}
    for kind in kinds:
        times = child(kind, env_id, steps, repeats, atari_obs)
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
    parser.add_argument("--atari-obs", choices=ATARI_OBS, default="raw",
                        help="raw: 210x160 RGB frames as the paper stepped them; preprocessed: srl's 84x84 grey")
    parser.add_argument("--child", choices=sorted(MEASURES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(MEASURES[args.child](args.env, args.steps, args.repeats, args.atari_obs)))
        return 0
    _ensure_ray()
    import ray

    load_at_start = list(os.getloadavg())
    kinds = ["ray", "srl_actor", "srl_dataflow"]
    results = [] if args.steps <= 0 else [compare(args.env, args.steps, args.repeats, kinds, args.atari_obs)]
    try:
        import ale_py

        atari = ale_py.__version__
    except ImportError:
        atari = None
        log("ale-py is not installed: Atari skipped")
    if atari and args.atari_steps > 0:
        results.append(compare(ATARI_ID, args.atari_steps, args.repeats, [*kinds, "srl_envpool"], args.atari_obs))
    print(json.dumps({
        "benchmark": "lf_lockstep",
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "loadavg_at_start": load_at_start,
                    "loadavg_at_end": list(os.getloadavg())},
        "ray_version": ray.__version__, "ale_py_version": atari, "repeats": args.repeats,
        "paper_lf_over_ray": {"gym": 1.21, "atari": 11.62},
        "results": results,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
