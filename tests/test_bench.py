"""`srl bench sampling` prints one JSON line with a measured rate (no speed is asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def test_bench_sampling_prints_one_json_line_last():
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "bench", "sampling", "CartPole-v1", "stop.time_limit_s=6", "launch.num_actor_workers=2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["env"] == "CartPole-v1" and result["env_steps_per_s"] > 0
    assert result["config"]["num_actor_workers"] == 2 and result["measured_s"] > 0  # start-up under load may take seconds
    assert result["config"]["inference"] == "inline"  # the bench's default placement
    assert result["time_breakdown"]["actor:1"]["env_step"] > 0


def test_rings_of_cheap_envs_are_big_and_costly_or_slow_to_build_ones_small():
    from srl.bench import EnvProbe, _defaults

    cheap, costly, slow_build = EnvProbe(0.001, 20e-6), EnvProbe(0.001, 2e-3), EnvProbe(1.2, 20e-6)
    assert _defaults("CartPole-v1", {})["dataflow"]["envs_per_actor"] == 1024  # auto -> vector backend
    assert _defaults("CartPole-v1", {"env_backend": "loop"}, cheap)["dataflow"]["envs_per_actor"] == 512  # per-batch work amortised
    assert _defaults("Acrobot-v1", {}, cheap)["dataflow"]["envs_per_actor"] == 512  # no vector entry point: loop
    assert _defaults("Acrobot-v1", {}, costly)["dataflow"]["envs_per_actor"] == 8  # its step dwarfs the per-batch work
    assert _defaults("Acrobot-v1", {}, slow_build)["dataflow"]["envs_per_actor"] == 4  # 5 s of building at most
    assert _defaults("sleep", {})["dataflow"]["envs_per_actor"] == 8  # not built here to look at: few
    assert _defaults("ALE/Pong-v5", {"env_backend": "bogus"})["dataflow"]["envs_per_actor"] == 8  # build_config will refuse it


def bench(*args: str) -> subprocess.CompletedProcess:
    """`srl bench sampling` of the env in tests/slow_build_env.py (1.5 s to build each), one actor."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    return subprocess.run([sys.executable, "-m", "srl.cli", "bench", "sampling", "slow_build_env:SlowBuild-v0",
                           "launch.num_actor_workers=1", *args], capture_output=True, text=True, timeout=240, env=env,
                          cwd=TESTS)


def test_a_slow_to_build_env_is_measured_after_its_envs_are_built():
    """Before, the window was counted from the launch and the ring was 512 envs: an env slow to build
    (Crafter) printed 0.0 env steps/s and exit code 0."""
    proc = bench("stop.time_limit_s=2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["env_steps_per_s"] or 0) > 0 and result["measured_s"] > 1.0, result
    assert result["error"] is None
    assert result["config"]["envs_per_actor"] == 3  # 5 s of building at 1.5 s an env
    assert result["env_build_s"] >= 1.5 and result["start_up_s"] >= 3 * 1.5  # the ring built before the first step


def test_a_bench_that_steps_nothing_exits_non_zero_and_says_why():
    proc = bench("stop.time_limit_s=1", "stop.time_limit_counts=launch")  # the seconds from the launch: none to step in
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["env_steps_per_s"] is None and result["env_steps"] == 0
    assert "srl bench: no env step was taken in" in proc.stderr
    assert "one env took 1.5" in result["error"] and "an actor builds 3" in result["error"]


def test_sampling_rate_leaves_the_start_up_ramp_out_when_asked():
    from srl.bench import sampling_rate

    reports = [{"time_s": t, "env_steps": steps} for t, steps in
               [(1.0, 0), (2.0, 100), (3.0, 1100), (4.0, 3100), (5.0, 5100), (6.0, 7100)]]
    assert sampling_rate(reports) == (1750.0, 4.0)  # from the first report with steps
    assert sampling_rate(reports, measure_last_s=2.0) == (2000.0, 2.0)  # the steady last 2 s
    assert sampling_rate(reports, measure_last_s=60.0) == (1750.0, 4.0)  # too short a run: all of it
