"""MuJoCo envs and the halfcheetah-sac experiment.

The smoke test runs a few thousand env steps (not a learning claim: HalfCheetah needs 100k+ steps
to move, see docs/results.md) and checks that the run completes and writes its metrics. It
skips where the [mujoco] extra is not installed; the missing-extra message is tested everywhere.
"""

from __future__ import annotations

import json

import pytest

from srl.envs import make_vector_env
from srl.envs import mujoco as srl_mujoco


def test_mujoco_ids_are_told_apart():
    assert srl_mujoco.is_mujoco_id("HalfCheetah-v5")
    assert not srl_mujoco.is_mujoco_id("CartPole-v1")
    assert not srl_mujoco.is_mujoco_id("NoSuchEnv-v0")


def test_missing_extra_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(srl_mujoco, "mujoco_installed", lambda: False)
    with pytest.raises(ImportError, match=r"pip install 'srl\[mujoco\]'"):
        make_vector_env("HalfCheetah-v5", None, num_envs=1)


def test_halfcheetah_sac_smoke(run_dir):
    from srl.config.load import load_config
    from srl.launch.run import run_experiment

    # the experiment's envs, policy and algorithm; fewer updates per env step so it takes seconds
    overrides = ["stop.total_env_steps=2000", "replay.warmup=1000", "replay.capacity=10000", "replay.replay_ratio=64",
                 f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false"]
    config = load_config("halfcheetah-sac", overrides)
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["env_steps"] >= 2000, summary
    assert summary["updates"] > 0 and summary["episodes"] >= 2, summary
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "losses/critic_loss" in r]
    assert trained and all(abs(r["losses/critic_loss"]) < float("inf") for r in trained)
    assert (run_dir / "checkpoints" / "latest.json").is_file()
