"""`srl bench sampling` prints one JSON line with a measured rate (no speed is asserted)."""

from __future__ import annotations

import json
import subprocess
import sys


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


def test_rings_of_cheap_envs_are_big_and_atari_keeps_small_ones():
    from srl.bench import _defaults

    assert _defaults("CartPole-v1", {})["dataflow"]["envs_per_actor"] == 1024  # auto -> vector backend
    assert _defaults("CartPole-v1", {"env_backend": "loop"})["dataflow"]["envs_per_actor"] == 512  # per-batch work amortised
    assert _defaults("Acrobot-v1", {})["dataflow"]["envs_per_actor"] == 512  # no vector entry point: loop
    assert _defaults("ALE/Pong-v5", {"env_backend": "bogus"})["dataflow"]["envs_per_actor"] == 8  # build_config will refuse it


def test_sampling_rate_leaves_the_start_up_ramp_out_when_asked():
    from srl.bench import sampling_rate

    reports = [{"time_s": t, "env_steps": steps} for t, steps in
               [(1.0, 0), (2.0, 100), (3.0, 1100), (4.0, 3100), (5.0, 5100), (6.0, 7100)]]
    assert sampling_rate(reports) == (1750.0, 4.0)  # from the first report with steps
    assert sampling_rate(reports, measure_last_s=2.0) == (2000.0, 2.0)  # the steady last 2 s
    assert sampling_rate(reports, measure_last_s=60.0) == (1750.0, 4.0)  # too short a run: all of it
