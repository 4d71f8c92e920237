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


@pytest.mark.parametrize("fused", [True, False])
def test_a_device_tensor_rate_gives_the_float_rates_parameters_without_a_host_read(fused, monkeypatch):
    """A pod sets the rate as a tensor (its schedule on the device); neither path reads it, or the
    step count, back to the host (the foreach path used to: float(step) per step)."""
    torch.manual_seed(0)
    start = [torch.randn(5, 3), torch.randn(3)]
    results = []
    for rate in (2e-3, torch.tensor(2e-3, dtype=torch.float64)):
        params = [p.clone().requires_grad_(True) for p in start]
        opt = Adam(params, lr=rate, eps=1e-5)
        opt.fused = fused and opt.fused
        torch.manual_seed(1)
        for _ in range(20):
            for p in params:
                p.grad = torch.randn_like(p)
            if isinstance(rate, torch.Tensor):
                for name in ("item", "tolist", "__float__", "__bool__", "__int__"):
                    monkeypatch.setattr(torch.Tensor, name, _refused(name))
            opt.step()
            monkeypatch.undo()
        results.append(params)
    for p, q in zip(*results):
        torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)


def _refused(name):
    def read(self, *args, **kwargs):
        raise AssertionError(f"host read in Adam.step: Tensor.{name}")
    return read


def test_leaving_the_fused_kernel_is_said_once(monkeypatch, capsys):
    def refuse(*args, **kwargs):
        raise RuntimeError("no fused Adam for this device")

    monkeypatch.setattr(torch, "_fused_adam_", refuse, raising=False)
    params = [torch.ones(4, requires_grad=True)]
    opt = Adam(params, lr=0.1)
    opt.fused = True
    for _ in range(3):
        params[0].grad = torch.ones(4)
        opt.step()
    err = capsys.readouterr().err
    assert err.count("Adam leaves its fused kernel") == 1 and "no fused Adam for this device" in err
    assert float(opt.steps[0]) == 3.0 and params[0].detach().lt(1.0).all()
