"""A device per role (srl.devices): names resolved in one place, CUDA refused before launch where
there is none, what each role used in summary.json; and, where CUDA exists (tests marked gpu),
trainers and policy workers on it learning as on the CPU, and their checkpoints read on the CPU."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from srl import devices
from srl.config import ConfigError
from srl.config.load import load_config
from srl.evaluate import evaluate_run
from srl.launch.run import run_experiment


def test_names_resolve_in_one_place(monkeypatch):
    monkeypatch.setattr(devices, "cuda_count", lambda: 0)
    assert devices.resolve("auto") == torch.device("cpu") == devices.resolve("cpu")
    monkeypatch.setattr(devices, "cuda_count", lambda: 2)
    assert devices.resolve("auto") == torch.device("cuda", 0)
    # the trainers of a group: one GPU each, round the GPUs there are
    assert [devices.resolve("cuda", i) for i in range(3)] == [torch.device("cuda", i) for i in (0, 1, 0)]
    assert devices.resolve("cuda:1", 0) == torch.device("cuda", 1)


def test_what_cannot_be_used_here_is_named(monkeypatch):
    monkeypatch.setattr(devices, "cuda_count", lambda: 0)
    assert devices.problem("auto") is None and devices.problem("cpu") is None
    assert "not a device name" in devices.problem("gpu") and "cuda:N" in devices.problem("gpu")
    assert "sees no CUDA device" in devices.problem("cuda")
    monkeypatch.setattr(devices, "cuda_count", lambda: 2)
    assert devices.problem("cuda:1") is None
    assert "cuda:0 to cuda:1" in devices.problem("cuda:2")


def test_cuda_where_there_is_none_is_refused_before_launch(monkeypatch, run_dir):
    monkeypatch.setattr(devices, "cuda_count", lambda: 0)
    for override, field in (("devices.trainer=cuda", "devices.trainer"), ("devices.policy=cuda:0", "devices.policy"),
                            ("devices.eval=tpu", "devices.eval")):
        with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
            load_config("cartpole-ppo", [override, f"run.run_dir={run_dir}"])
        assert not run_dir.exists()
    with pytest.raises(ConfigError, match="'pod.device'"):
        load_config("cartpole-pod", ["pod.device=cuda"])
    # under Ray the GPUs are the workers' nodes', not the driver's: only the name is checked
    config = load_config("cartpole-ppo", ["launch.launcher=ray", "devices.trainer=cuda"])
    assert config.devices.trainer == "cuda"


def test_summary_says_what_each_role_used(run_dir):
    config = load_config("cartpole-ppo", [
        "launch.launcher=inline", "dataflow.inference=policy_worker", "devices.trainer=cpu", "devices.policy=cpu",
        "stop.total_env_steps=3000", f"run.run_dir={run_dir}", "monitor.display=off",
    ])  # fmt: skip
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["devices"] == {"trainer": "cpu", "policy": "cpu"}
    assert summary["updates"] > 0


needs_cuda = pytest.mark.gpu


def run_alone(experiment: str, run_dir, *overrides: str) -> dict:
    """A run in a process of its own, as `srl run` starts one, and its summary. A forked worker
    cannot use CUDA once its parent's driver is initialised, and an earlier run in this test
    process (even an inline CPU one) can have done that below torch's lazy init."""
    args = [sys.executable, "-m", "srl.cli", "run", experiment, *overrides, f"run.run_dir={run_dir}", "monitor.display=off"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((run_dir / "summary.json").read_text())


@needs_cuda
@pytest.mark.parametrize("launcher", ["local", "inline"])
def test_ppo_trainer_and_policy_worker_on_cuda_reach_475(launcher, run_dir):
    summary = run_alone("cartpole-ppo", run_dir, f"launch.launcher={launcher}", "dataflow.inference=policy_worker",
                        "devices.trainer=cuda", "devices.policy=cuda", "run.seed=1", "stop.total_env_steps=400000")
    assert summary["devices"] == {"trainer": "cuda:0", "policy": "cuda:0"}
    assert summary["episode_return_mean"] >= 475, summary
    # trained on the GPU, played on the CPU (srl eval maps the checkpoint to the host)
    assert evaluate_run(run_dir, episodes=5, seed=0)["return_mean"] >= 150


@needs_cuda
def test_dqn_and_sac_replay_trainers_on_cuda_learn(tmp_path):
    summary = run_alone("cartpole-dqn", tmp_path / "dqn", "devices.trainer=cuda", "run.seed=1",
                        "stop.total_env_steps=40000")
    assert summary["devices"]["trainer"] == "cuda:0" and summary["episode_return_mean"] >= 100, summary
    summary = run_alone("pendulum-sac", tmp_path / "sac", "devices.trainer=cuda", "run.seed=1", "stop.total_env_steps=3000")
    assert summary["updates"] > 100, summary


def test_a_local_run_is_refused_where_cuda_is_initialised_already(monkeypatch):
    """The local launcher forks its workers: a child of a process that used CUDA cannot use it."""
    monkeypatch.setattr(devices, "cuda_count", lambda: 1)
    monkeypatch.setattr("srl.config.checks.torch_cuda_initialized", lambda: True)
    with pytest.raises(ConfigError, match="launch.launcher=inline"):
        load_config("cartpole-ppo", ["devices.trainer=cuda"])
    assert load_config("cartpole-ppo", ["devices.trainer=cpu"]).launch.launcher == "local"  # every role on the CPU
    assert load_config("cartpole-ppo", ["devices.trainer=cuda", "launch.launcher=inline"]).launch.launcher == "inline"
