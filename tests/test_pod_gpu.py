"""A pod on CUDA (issue 35): the rollout and the update captured as CUDA graphs give the eager
path's numbers, and cartpole-pod-gpu reaches 475 there. Each check runs in a process of its own
(`python -m srl.testing.pod`), as tests/test_devices.py's runs do: CUDA initialised in the test
process would keep later local launches from forking workers that use it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu


def check(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "srl.testing.pod", *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cuda_graph_iterations_give_the_eager_numbers():
    out = check("graphs", "--polls", "8", "--seed", "1")
    graphs, eager = out["on"], out["off"]
    assert graphs["captured"] and not eager["captured"]
    for a, b in zip(graphs["params"], eager["params"]):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=1e-3, atol=1e-4)
    for key in ("env_steps", "updates", "policy_version", "episodes"):
        assert graphs["report"][key] == eager["report"][key], key
    for key in ("losses/policy_loss", "losses/value_loss", "losses/entropy"):
        assert graphs["report"][key] == pytest.approx(eager["report"][key], rel=1e-3, abs=1e-4), key


def test_cartpole_pod_gpu_reaches_475_on_cuda():
    out = check("reach", "--seed", "1")
    assert out["graphs"] and out["reached"] and out["return_mean"] >= 475, out
