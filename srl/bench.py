"""`srl bench sampling ENV_ID [key=value ...]`: the dataflow's sampling speed on an env.

The same workers and streams as training, with a random policy and a trainer that consumes
segments and learns nothing, for `time_limit_s` seconds. The rate is taken between the first
report with env steps and the last, so process start-up is not counted. Defaults: one actor
per core with inline inference (SAMPLING_DEFAULTS); any config field can be overridden.
Atari ids ("ALE/Pong-v5") get the standard preprocessing (srl.envs.atari) and ATARI_DEFAULTS;
natively batched rings (env_backend auto -> vector for CartPole-v1, or envpool) NATIVE_DEFAULTS;
other per-env rings (env_backend loop) LOOP_DEFAULTS.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from srl.checks import build_config
from srl.config import apply_overrides, parse_overrides, translate_moved
from srl.envs.atari import is_atari_id
from srl.envs.native_backends import resolve_backend
from srl.launch.run import run_experiment

SAMPLING_DEFAULTS: dict[str, Any] = {
    "experiment": "bench-sampling",
    "policy": "random",
    "algorithm": "none",
    "stop": {"time_limit_s": 10.0, "total_env_steps": 10**12},
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
# expensive env's step dwarfs that work at any ring size.
LOOP_DEFAULTS: dict[str, Any] = {"dataflow": {"envs_per_actor": 512}}


def _defaults(env_id: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """SAMPLING_DEFAULTS plus the ones for the env's kind (Atari, natively batched)."""
    if is_atari_id(env_id):  # an Atari env's step dominates its call, and its actor is slow to build
        return apply_overrides(SAMPLING_DEFAULTS, ATARI_DEFAULTS)
    try:
        backend = resolve_backend(env_id, overrides.get("env_kwargs") or {}, overrides.get("env_backend", "auto"))
    except (ValueError, ImportError):
        backend = "loop"  # build_config then reports the bad value, naming its field
    return apply_overrides(SAMPLING_DEFAULTS, NATIVE_DEFAULTS if backend in ("vector", "envpool") else LOOP_DEFAULTS)


def bench_sampling(env_id: str, overrides: list[str], measure_last_s: float | None = None) -> dict[str, Any]:
    """Run the sampling dataflow and return its figures; the rate is taken from the first report
    with env steps to the last or, with `measure_last_s`, over the run's last that many seconds
    (for many workers that start one after another, the ramp would otherwise count)."""
    with tempfile.TemporaryDirectory(prefix="srl-bench-") as tmp:
        given = translate_moved(parse_overrides(overrides))
        defaults = _defaults(env_id, apply_overrides({}, given))
        values = apply_overrides(apply_overrides(defaults, {"env": env_id, "run": {"run_dir": str(Path(tmp) / "run")}}),
                                 given)
        config = build_config(values)
        code = run_experiment(config)
        run_dir = Path(str(config.run.run_dir))
        lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
        breakdown = json.loads((run_dir / "summary.json").read_text()).get("time_breakdown", {})
    rate, seconds = sampling_rate(lines, measure_last_s)
    flow, launch = config.dataflow, config.launch
    return {
        "benchmark": "sampling",
        "env": env_id,
        "env_steps_per_s": rate,
        "env_steps": lines[-1]["env_steps"],
        "measured_s": round(seconds, 3),
        "exit_code": code,
        "config": {"launcher": launch.launcher, "num_actor_workers": launch.num_actor_workers,
                   "envs_per_actor": flow.envs_per_actor, "ring_splits": flow.ring_splits, "inference": flow.inference,
                   "num_policy_workers": launch.num_policy_workers, "env_backend": config.env_backend,
                   "sample_length": flow.sample_length},
        "time_breakdown": breakdown,  # worker -> seconds per category (srl.monitor.timing)
    }


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
