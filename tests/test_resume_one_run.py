"""A resumed run is one run (srl.launch.launches): killed and resumed twice, its metrics.jsonl never goes
back in env steps, updates, episodes or time, and summary.json's totals are the sum of its launches'.

Before, each `run.resume=` started env_steps at the checkpoint's count (below the last logged one),
and updates, episodes and time_s at 0; summary.json held the last launch alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from srl import checkpoint

TESTS = Path(__file__).parent
ROOT = TESTS.parent
COUNTERS = ("env_steps", "updates", "episodes", "time_s")
BASE = ("launch.launcher=inline", "monitor.display=off", "stop.target_return=null", "run.checkpoint_interval_s=3",
        "monitor.log_interval_s=0.25", "monitor.learning_curve=false")


def start(experiment: str, *overrides: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    return subprocess.Popen([sys.executable, "-m", "srl.cli", "run", experiment, *BASE, *overrides], cwd=TESTS,
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]


def kill_after_a_checkpoint(proc: subprocess.Popen, run_dir: Path, launch: int, sig: int, past: bool = True) -> None:
    """Send `sig` to the run we started once this launch has a checkpoint and logged rows (with `past`,
    rows past its newest checkpoint: the steps after it are re-done by the next launch)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        meta = checkpoint.latest_meta(run_dir) or {}
        mine = [r for r in rows(run_dir) if r.get("launch") == launch] if (run_dir / "metrics.jsonl").exists() else []
        if meta and len(mine) >= 6 and (mine[-1]["policy_version"] > meta["version"] or not past):
            break
        time.sleep(0.1)
    assert proc.poll() is None, f"launch {launch} ended before it was killed: {proc.stderr.read()[-2000:]}"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 130), err[-2000:]


def check_one_run(run_dir: Path, launches: int, redone: bool = True) -> dict:
    """metrics.jsonl monotone in every counter; summary.json's totals = the sum of its launches'."""
    table = rows(run_dir)
    assert sorted({r["launch"] for r in table}) == list(range(1, launches + 1))
    for key in COUNTERS:
        values = [r[key] for r in table]
        backs = [(a, b) for a, b in zip(values, values[1:]) if b < a]
        assert not backs, f"{key} went back: {backs[:3]}"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["launch"] == launches and [x["launch"] for x in summary["launches"]] == list(range(1, launches + 1))
    for key in ("env_steps", "updates", "episodes"):
        assert summary[key] == sum(x[key] for x in summary["launches"]), key
        assert summary[key] >= table[-1][key]
    assert summary["wall_time_s"] == pytest.approx(sum(x["time_s"] for x in summary["launches"]), abs=0.01)
    assert summary["wall_time_s"] >= table[-1]["time_s"]
    assert all(x["env_steps"] > 0 and x["time_s"] > 0 for x in summary["launches"])
    # the steps after each checkpoint were taken again: counted in env_steps and in env_steps_redone
    assert summary["env_steps_redone"] == sum(x["env_steps_redone"] for x in summary["launches"])
    # after the SIGKILL: the rows logged past the checkpoint (a SIGINT's final checkpoint leaves few or none)
    assert summary["launches"][1]["env_steps_redone"] > 0 or not redone
    assert summary["launches"][0]["stop_reason"].startswith("killed")  # SIGKILL: it wrote no summary
    assert len(json.loads((run_dir / "launches.json").read_text())) == launches
    return summary


def test_a_run_killed_and_resumed_twice_is_one_run(run_dir):
    """SIGKILL of the controller (inline: one process), then SIGINT (local launcher), then a launch to the
    run's time limit (counting the run's seconds, all launches: stop.time_limit_counts=run, the default)."""
    first = start("cartpole-ppo", f"run.run_dir={run_dir}", "stop.total_env_steps=100000000")
    kill_after_a_checkpoint(first, run_dir, 1, signal.SIGKILL)
    # the local launcher (a process per worker) this time: Ctrl-C stops its workers, each trainer checkpoints
    second = start("cartpole-ppo", f"run.resume={run_dir}", "stop.total_env_steps=100000000", "launch.launcher=local")
    kill_after_a_checkpoint(second, run_dir, 2, signal.SIGINT)
    run_s = rows(run_dir)[-1]["time_s"]
    limit_s = run_s + 3.0
    third = start("cartpole-ppo", f"run.resume={run_dir}", "stop.total_env_steps=100000000",
                  f"stop.time_limit_s={limit_s}")
    _, err = third.communicate(timeout=300)
    assert third.returncode == 0, err[-2000:]
    summary = check_one_run(run_dir, 3)
    assert summary["stop_reason"] == f"time_limit_s {limit_s} reached"
    assert [x["stop_reason"] for x in summary["launches"]][1:] == ["interrupted", summary["stop_reason"]]
    # the run's seconds reached the limit; this launch ran only what was left of it (plus start-up)
    assert summary["wall_time_s"] >= limit_s and summary["launches"][2]["time_s"] < limit_s - run_s + 30


def test_a_pod_run_killed_and_resumed_is_one_run(run_dir):
    """Pods (env, policy and PPO in one worker) checkpoint and resume too: the same counts go on. An
    inline pod's checkpoint is often newer than its last logged row: nothing logged is re-done then."""
    first = start("cartpole-pod", f"run.run_dir={run_dir}", "stop.total_env_steps=100000000")
    kill_after_a_checkpoint(first, run_dir, 1, signal.SIGKILL, past=False)
    second = start("cartpole-pod", f"run.resume={run_dir}", "stop.total_env_steps=100000000",
                   "stop.time_limit_s=3", "stop.time_limit_counts=launch")
    _, err = second.communicate(timeout=300)
    assert second.returncode == 0, err[-2000:]
    summary = check_one_run(run_dir, 2, redone=False)
    assert summary["stop_reason"] == "time_limit_s 3.0 reached (stop.time_limit_counts=launch)"
    assert summary["launches"][1]["time_s"] >= 3.0
