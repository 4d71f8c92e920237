"""Checkpoints at an interval and at exit; resume from a run directory; eval of the saved policy."""

from __future__ import annotations

import json

import torch

from srl import checkpoint
from srl.config.load import load_config
from srl.launch.run import run_experiment


def summary_of(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def test_resume_continues_version_steps_and_optimizer(run_dir):
    base = ["launch.launcher=inline", "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off", "run.checkpoint_interval_s=0.5"]
    assert run_experiment(load_config("cartpole-ppo", [*base, "stop.total_env_steps=6000"])) == 0
    first = summary_of(run_dir)
    meta = checkpoint.latest_meta(run_dir)
    assert meta["version"] == first["policy_version"] > 0
    state = checkpoint.load_latest(run_dir)
    assert state["algorithm"]["optimizer"]["state"], "optimizer moments are saved"
    policy_hash = first["params_sha256"]

    resumed = load_config("cartpole-ppo", [f"run.resume={run_dir}", "stop.total_env_steps=12000"])
    assert str(resumed.run.run_dir) == str(run_dir)
    assert run_experiment(resumed) == 0
    second = summary_of(run_dir)
    assert second["policy_version"] > first["policy_version"]
    assert second["env_steps"] >= 12000
    assert second["params_sha256"] != policy_hash
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert max(x["env_steps"] for x in lines) >= 12000


def test_params_hash_is_bit_exact():
    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    assert checkpoint.params_sha256(a) == checkpoint.params_sha256(b)
    with torch.no_grad():
        b.bias[0] += 1e-7
    assert checkpoint.params_sha256(a) != checkpoint.params_sha256(b)


def test_srl_eval_reports_the_return_of_the_saved_policy(run_dir):
    import subprocess
    import sys

    base = ["launch.launcher=inline", "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off", "stop.total_env_steps=3000"]
    assert run_experiment(load_config("cartpole-ppo", base)) == 0
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "eval", str(run_dir), "--episodes", "3"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["episodes"] == 3 and len(result["returns"]) == 3
    assert result["policy_version"] == summary_of(run_dir)["policy_version"]
    assert all(r >= 1 for r in result["returns"])  # CartPole pays 1 per step survived


def test_srl_eval_of_a_directory_without_checkpoint_is_a_clear_error(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "srl.cli", "eval", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "no config.yaml" in proc.stderr and "Traceback" not in proc.stderr
