"""`srl bench sampling ENV_ID [key=value ...]`: the dataflow's sampling speed on an env.

The same workers and streams as training, with a random policy and a trainer that consumes
segments and learns nothing, for `time_limit_s` seconds from the first env steps
(stop.time_limit_counts=stepping: building the envs is not in the window). The rate is taken
between the first report with env steps and the last, so process start-up is not counted; the
seconds until the first env steps (process start, env construction) are given as `start_up_s`.
Defaults: one actor per core with inline inference (SAMPLING_DEFAULTS); any config field can be
overridden. Atari ids ("ALE/Pong-v5") get the standard preprocessing (srl.envs.atari) and
ATARI_DEFAULTS (EnvPool steps them where it is installed: env_backend=auto); natively batched rings
(env_backend auto -> vector for CartPole-v1, or envpool)
NATIVE_DEFAULTS; other per-env rings (env_backend loop) a size from one env built and stepped
here first (`loop_ring_size`). With launch.layout=machine the machine sizes the actors instead
(srl.graph.sizing). A bench that stepped nothing says why and exits 1.

Before: `srl bench sampling CrafterReward-v1` built 512 Crafter envs per actor (the loop
default then, sized for CartPole), which took longer than the 10 s window counted from the
launch, and printed 0.0 env steps/s with exit code 0.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from srl.config import apply_overrides, parse_overrides, translate_moved
from srl.config.checks import build_config
from srl.envs.atari import is_atari_id
from srl.envs.native_backends import resolve_backend
from srl.launch.run import run_experiment

SAMPLING_DEFAULTS: dict[str, Any] = {
    "experiment": "bench-sampling",
    "policy": "random",
    "algorithm": "none",
    "stop": {"time_limit_s": 10.0, "time_limit_counts": "stepping", "total_env_steps": 10**12},
    "monitor": {"display": "off", "log_interval_s": 0.5},
    # The fastest placement on a small machine (docs/tuning.md): one actor per core, each acting
    # inline (the default) on one ring of 32 envs; no policy worker competes for the cores.
    "launch": {"num_actor_workers": os.cpu_count() or 1},
    "dataflow": {"envs_per_actor": 32},
}
# An Atari actor takes seconds to build and reset its envs (no-op starts): fewer envs per actor,
# a longer run to measure after start-up, and a heartbeat limit that start-up under load can't hit.
ATARI_DEFAULTS: dict[str, Any] = {"stop": {"time_limit_s": 40.0}, "dataflow": {"envs_per_actor": 8},
                                  "launch": {"heartbeat_timeout_s": 120.0}}
# A natively batched ring (env_backend vector/envpool: CartPole-v1 by default) costs about the same
# per call for 32 envs as for 1024, so a big ring amortises the call and the actor's per-step
# bookkeeping (CartPole, 2 cores: ~35k steps/s at 32 envs, ~200k at 256, ~500k at 1024).
NATIVE_DEFAULTS: dict[str, Any] = {"dataflow": {"envs_per_actor": 1024}}
# A per-env ring (env_backend loop) of a cheap env (CartPole: ~10 us a step) pays the actor's
# per-batch work (inference, recording the row, episode counts, the hand-off) once per ring step:
# the actor spent 76% of its time in env.step at 32 envs, 92% at 256, 95% at 1024 (docs/benchmarks.md,
# "Per-env CartPole"); 512 stays clear of the memory 1024 MuJoCo envs per actor would take. An
# expensive env's step dwarfs that work at any ring size: it gets few envs, and an env slow to
# build fewer still (Crafter: ~1 s each, so 512 took minutes to build before anything stepped).
CHEAP_LOOP_ENVS = 512
FEW_LOOP_ENVS = 8  # an env whose step is not cheap, or one not built here to look at (srl's own envs)
CHEAP_STEP_S = 100e-6  # CartPole steps in ~10 us, Acrobot ~50 us; MuJoCo, Crafter, highway far more
RING_BUILD_BUDGET_S = 5.0  # the most an actor's ring should take to build, from one env's time here


@dataclasses.dataclass
class EnvProbe:
    """One env built and stepped in this process before the bench: its build and step seconds."""

    build_s: float
    step_s: float


def probe_env(env_id: str, kwargs: dict[str, Any]) -> EnvProbe | None:
    """Build one Gymnasium env, reset it and take random steps for up to 0.5 s; None for an env that
    is not a Gymnasium id or that fails here (build_config and the run then say why)."""
    import gymnasium as gym

    from srl.envs import _is_gymnasium_id

    if not _is_gymnasium_id(env_id):
        return None
    try:
        started = time.perf_counter()
        env = gym.make(env_id, **kwargs)
        built = time.perf_counter()
        try:
            env.reset(seed=0)
            env.action_space.seed(0)
            steps, stepped = 0, time.perf_counter()
            while steps < 200 and time.perf_counter() - stepped < 0.5:
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                steps += 1
                if terminated or truncated:
                    env.reset()
            step_s = (time.perf_counter() - stepped) / max(steps, 1)
        finally:
            env.close()
    except Exception:  # not ours to judge here: the run reports it, naming the field
        return None
    return EnvProbe(built - started, step_s)


def loop_ring_size(probe: EnvProbe | None) -> int:
    """Envs per actor for a per-env ring: many for a cheap env, few for a costly one, fewer where
    building them would take longer than RING_BUILD_BUDGET_S."""
    if probe is None:
        return FEW_LOOP_ENVS
    size = CHEAP_LOOP_ENVS if probe.step_s < CHEAP_STEP_S else FEW_LOOP_ENVS
    return max(1, min(size, int(RING_BUILD_BUDGET_S / max(probe.build_s, 1e-9))))


def _defaults(env_id: str, overrides: dict[str, Any], probe: EnvProbe | None = None) -> dict[str, Any]:
    """SAMPLING_DEFAULTS plus the ones for the env's kind (Atari, natively batched, per-env: sized by
    `probe`, one env built and stepped here). With launch.layout=machine the machine sizes the
    actors (srl.graph.sizing): the bench's own sizes are left out."""
    defaults = _kind_defaults(env_id, overrides, probe)
    if (overrides.get("launch") or {}).get("layout") == "machine":
        defaults["launch"] = {k: v for k, v in defaults["launch"].items() if k != "num_actor_workers"}
        defaults["dataflow"] = {k: v for k, v in defaults["dataflow"].items() if k != "envs_per_actor"}
    return defaults


def _kind_defaults(env_id: str, overrides: dict[str, Any], probe: EnvProbe | None) -> dict[str, Any]:
    if is_atari_id(env_id):  # an Atari env's step dominates its call, and its actor is slow to build
        return apply_overrides(SAMPLING_DEFAULTS, ATARI_DEFAULTS)
    if _backend(env_id, overrides) in ("vector", "envpool"):
        return apply_overrides(SAMPLING_DEFAULTS, NATIVE_DEFAULTS)
    return apply_overrides(SAMPLING_DEFAULTS, {"dataflow": {"envs_per_actor": loop_ring_size(probe)}})


def _backend(env_id: str, overrides: dict[str, Any]) -> str:
    try:
        return resolve_backend(env_id, overrides.get("env_kwargs") or {}, overrides.get("env_backend", "auto"))
    except (ValueError, ImportError):
        return "loop"  # build_config then reports the bad value, naming its field


def _probe(env_id: str, given: dict[str, Any]) -> EnvProbe | None:
    """One env built and stepped here, for a per-env ring whose size is not given."""
    if is_atari_id(env_id) or _backend(env_id, given) != "loop":
        return None
    if (given.get("dataflow") or {}).get("envs_per_actor") is not None:
        return None
    return probe_env(env_id, given.get("env_kwargs") or {})


def bench_sampling(env_id: str, overrides: list[str], measure_last_s: float | None = None) -> dict[str, Any]:
    """Run the sampling dataflow and return its figures; the rate is taken from the first report
    with env steps to the last or, with `measure_last_s`, over the run's last that many seconds
    (for many workers that start one after another, the ramp would otherwise count)."""
    with tempfile.TemporaryDirectory(prefix="srl-bench-") as tmp:
        given = apply_overrides({}, translate_moved(parse_overrides(overrides)))
        probe = _probe(env_id, given)
        defaults = _defaults(env_id, given, probe)
        values = apply_overrides(apply_overrides(defaults, {"env": env_id, "run": {"run_dir": str(Path(tmp) / "run")}}),
                                 given)
        config = build_config(values)
        code = run_experiment(config)
        run_dir = Path(str(config.run.run_dir))
        metrics, summary = run_dir / "metrics.jsonl", run_dir / "summary.json"  # absent: it never started
        lines = [json.loads(x) for x in metrics.read_text().splitlines()] if metrics.is_file() else []
        breakdown = json.loads(summary.read_text()).get("time_breakdown", {}) if summary.is_file() else {}
    rate, seconds = sampling_rate(lines, measure_last_s) if lines else (None, 0.0)
    flow, launch = config.dataflow, config.launch
    first = next((x for x in lines if x["env_steps"] > 0), None)
    error = _nothing_measured(code, lines, rate, config, probe)
    return {
        "benchmark": "sampling",
        "env": env_id,
        "env_steps_per_s": None if error else rate,  # no figure rather than a 0.0 that reads as one
        "env_steps": lines[-1]["env_steps"] if lines else 0,
        "measured_s": round(seconds, 3),
        # from the command's start to the first report with env steps: process start and env construction
        "start_up_s": first["time_s"] if first is not None else None,
        "env_build_s": None if probe is None else round(probe.build_s, 4),  # one env, built here first
        "env_step_s": None if probe is None else round(probe.step_s, 7),
        "exit_code": code,
        "error": error,
        "config": {"launcher": launch.launcher, "num_actor_workers": launch.num_actor_workers,
                   "envs_per_actor": flow.envs_per_actor, "ring_splits": flow.ring_splits, "inference": flow.inference,
                   "num_policy_workers": launch.num_policy_workers, "env_backend": config.env_backend,
                   "env_backend_chosen": _backend(env_id, {"env_kwargs": config.env_kwargs, "env_backend": config.env_backend}),
                   "layout": launch.layout, "actor_niceness": launch.actor_niceness,
                   "sample_length": flow.sample_length},
        "time_breakdown": breakdown,  # worker -> seconds per category (srl.monitor.timing)
    }


def _nothing_measured(code: int, lines: list[dict[str, Any]], rate: float | None, config: Any,
                      probe: EnvProbe | None) -> str | None:
    """Why the bench has no figure (None when it has one): a run that failed, no env step, or
    steps in one report only."""
    if code != 0:
        return f"the sampling run ended with exit code {code} (its lines above say why)"
    envs = config.dataflow.envs_per_actor
    built = "" if probe is None else f"; one env took {probe.build_s:.2f} s to build here, an actor builds {envs}"
    if not lines or lines[-1]["env_steps"] == 0:
        waited = lines[-1]["time_s"] if lines else 0.0
        return (f"no env step was taken in {waited:.1f} s: the envs were not built and stepped before the run "
                f"stopped{built}; lower dataflow.envs_per_actor, or let stop.time_limit_s count from the first env "
                "steps (stop.time_limit_counts=stepping, the bench's default)")
    if not rate:
        return ("env steps were reported only once: no interval to measure a rate over; raise stop.time_limit_s"
                f" (stop.time_limit_counts={config.stop.time_limit_counts}){built}")
    return None


def sampling_rate(reports: list[dict[str, Any]], measure_last_s: float | None = None) -> tuple[float | None, float]:
    """(env steps/s, seconds measured) between the first report with env steps, or the latest one
    at least `measure_last_s` before the end, and the last report."""
    last = reports[-1]
    started = next((x for x in reports if x["env_steps"] > 0), reports[0])
    if measure_last_s is not None:
        early = [x for x in reports if x["env_steps"] > 0 and x["time_s"] <= last["time_s"] - measure_last_s]
        started = early[-1] if early else started
    seconds = last["time_s"] - started["time_s"]
    rate = round((last["env_steps"] - started["env_steps"]) / seconds, 1) if seconds > 0 else None
    return rate, seconds
