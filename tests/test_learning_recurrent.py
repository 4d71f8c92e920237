"""Learning test: on CartPole without velocities an LSTM policy clearly beats a memoryless one.

Fixed seed and env-step budget. Measured once (seed 1, inline launcher, 80k env steps):
cartpole-novel-mlp-ppo (the same PPO with a 64x64 MLP) ends at a mean-100 return of 46,
cartpole-lstm-ppo at 198; the threshold sits between them. The LSTM run stops once it reaches the
threshold (at about 50k env steps: 24 of its 41 s to the full budget)."""

from __future__ import annotations

import json

from srl.config.load import load_config
from srl.evaluate import evaluate_run
from srl.launch.run import run_experiment

BUDGET_ENV_STEPS = 80_000
THRESHOLD = 100.0  # mean return of the last 100 episodes (MLP: 46, LSTM: 198 at the budget)


def test_lstm_ppo_beats_the_memoryless_threshold_on_cartpole_without_velocities(run_dir):
    config = load_config(
        "cartpole-lstm-ppo",
        ["launch.launcher=inline", "run.seed=1", f"stop.total_env_steps={BUDGET_ENV_STEPS}",
         f"stop.target_return={THRESHOLD}", f"run.run_dir={run_dir}", "monitor.display=off"],
    )
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return") and summary["episode_return_mean"] >= THRESHOLD, summary
    result = evaluate_run(run_dir, episodes=3, seed=0)  # the saved policy keeps its state in srl eval
    assert result["return_mean"] >= THRESHOLD, result
