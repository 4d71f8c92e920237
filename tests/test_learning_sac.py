"""SAC through the buffer worker on Pendulum-v1 with a fixed env-step budget.

Random actions score about -1200 to -1500 an episode; at 12k env steps the mean over all
episodes so far must already be past -1100 (seed 1 gives about -880: the recent episodes are
near -200). The full run to a mean-100 return of -200 (~26k env steps) is recorded in
docs/results.md, too long for CI."""

from __future__ import annotations

import json

from srl.config.load import load_config
from srl.launch.run import run_experiment


def test_pendulum_sac_learns_to_swing_up(run_dir):
    config = load_config("pendulum-sac", ["run.seed=1", "stop.total_env_steps=12000", f"run.run_dir={run_dir}", "monitor.display=off"])
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] > 4500, summary
    assert summary["episode_return_mean"] >= -1100, summary
