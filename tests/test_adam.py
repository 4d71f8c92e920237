"""srl's Adam gives torch.optim.Adam's parameters, and does not import torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from srl.algos.adam import Adam


@pytest.mark.parametrize("fused", [True, False])
def test_same_parameters_as_torch_adam(fused):
    torch.manual_seed(0)
    ours = [torch.randn(5, 3, requires_grad=True), torch.randn(3, requires_grad=True)]
    theirs = [p.detach().clone().requires_grad_(True) for p in ours]
    mine = Adam(ours, lr=3e-3, eps=1e-5)
    mine.fused = fused and mine.fused
    reference = torch.optim.Adam(theirs, lr=3e-3, eps=1e-5, foreach=False)
    for step in range(50):
        grads = [torch.randn_like(p) for p in ours]
        for p, q, g in zip(ours, theirs, grads):
            p.grad, q.grad = g.clone(), g.clone()
        mine.param_groups[0]["lr"] = reference.param_groups[0]["lr"] = 3e-3 * (1 - step / 100)
        mine.step()
        reference.step()
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def test_state_round_trips():
    p = [torch.ones(4, requires_grad=True)]
    a = Adam(p, lr=0.1)
    p[0].grad = torch.ones(4)
    a.step()
    b = Adam([torch.ones(4, requires_grad=True)], lr=0.5)
    b.load_state_dict(a.state_dict())
    assert b.param_groups[0]["lr"] == 0.1 and float(b.steps[0]) == 1.0
    assert torch.equal(b.exp_avg[0], a.exp_avg[0])


def test_a_ppo_update_does_not_import_dynamo():
    code = (
        "import sys, torch, gymnasium as gym, numpy as np\n"
        "import srl.builtins\n"
        "from srl.algos.ppo import PPO, PPOConfig\n"
        "from srl.models.mlp import ActorCriticMLP\n"
        "pol = ActorCriticMLP(gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2))\n"
        "algo = PPO(pol, PPOConfig(), 1000)\n"
        "T, B = 4, 2\n"
        "batch = {k: torch.zeros(T + 1, B) for k in ('obs', 'reward', 'log_prob', 'value')}\n"
        "batch['obs'] = torch.zeros(T + 1, B, 4)\n"
        "batch['action'] = torch.zeros(T + 1, B, dtype=torch.int64)\n"
        "batch['terminated'] = batch['truncated'] = torch.zeros(T + 1, B, dtype=torch.bool)\n"
        "algo.step(batch, 0)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
