"""Learning tests with real thresholds: CartPole to a mean-100 return of 475, in both launchers.

Budgets are in env steps, not seconds, with fixed seeds (CI machines drift by 25% or more)."""

from __future__ import annotations

import json

import pytest

from srl.config.load import load_config
from srl.evaluate import evaluate_run
from srl.launch.run import run_experiment

BUDGET_ENV_STEPS = 400_000


@pytest.mark.parametrize("launcher", ["local", "inline"])
def test_cartpole_ppo_reaches_475(launcher, run_dir):
    config = load_config(
        "cartpole-ppo",
        [f"launch.launcher={launcher}", "run.seed=1", f"stop.total_env_steps={BUDGET_ENV_STEPS}", f"run.run_dir={run_dir}", "monitor.display=off"],
    )
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episode_return_mean"] >= 475, summary
    assert summary["stop_reason"].startswith("target_return"), summary
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert all(b["time_s"] - a["time_s"] <= 2.5 for a, b in zip(lines, lines[1:])), "a report every 2 s at most"
    assert {"env_steps", "time_s", "episode_return_mean"} <= set(lines[-1])
    assert list((run_dir / "tb").glob("events.out.tfevents.*")), "TensorBoard events"

    # The saved policy plays well without exploration. The inline run is deterministic, so its
    # final policy is always the same one; a local run stops when the mean of the last 100
    # episodes (several policy versions) crosses 475, which now and then (about 1 run in 20) is
    # while the newest version is mid-oscillation. There the check is that the checkpoint holds
    # the trained policy at all: random play scores about 22.
    result = evaluate_run(run_dir, episodes=5, seed=0)
    assert result["return_mean"] >= (400 if launcher == "inline" else 150), result
