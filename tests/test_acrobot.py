"""acrobot-ppo reaches a mean-100 return of -100 (fixed seed, env-step budget, not seconds)."""

import json

from srl.config.load import load_config
from srl.launch.run import run_experiment

BUDGET_ENV_STEPS = 150_000  # seeds 1-3 reach the target in 33k-46k steps


def test_acrobot_ppo_reaches_minus_100(run_dir):
    config = load_config(
        "acrobot-ppo", ["run.seed=1", f"stop.total_env_steps={BUDGET_ENV_STEPS}", f"run.run_dir={run_dir}", "monitor.display=off"]
    )
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= -100 and summary["episodes"] >= 100, summary
