"""SAC through the buffer worker on Pendulum-v1: a fixed env-step budget, then the saved policy is
evaluated greedily. Random actions score about -1200; the full run to a mean-100 return of -200
(~26k env steps) is recorded in docs/results.md, too long for CI."""

from __future__ import annotations

import json

from srl.config import load_config
from srl.evaluate import evaluate_run
from srl.launch.run import run_experiment


def test_pendulum_sac_learns_to_swing_up(run_dir):
    config = load_config("pendulum-sac", ["seed=1", "total_env_steps=12000", f"run_dir={run_dir}", "display=off"])
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] > 4000, summary
    result = evaluate_run(run_dir, episodes=5, seed=0)
    assert result["return_mean"] >= -500, result
