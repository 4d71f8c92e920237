"""APPO / IMPALA: config, hand-checked losses, and cartpole-appo learning with policy lag."""

import json
import math

import gymnasium as gym
import numpy as np
import pydantic
import pytest
import torch
from test_ppo import ScriptedPolicy

from srl.algos import APPO, APPOConfig, IMPALAConfig
from srl.api import registry
from srl.config import ConfigError
from srl.config.load import load_config
from srl.data import columns as C
from srl.launch.run import run_experiment
from srl.models import ActorCriticMLP

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def make_batch(policy, steps=16, rows=4, seed=0):
    """An on-policy batch: the stored log_prob is the policy's own."""
    g = torch.Generator().manual_seed(seed)
    obs = torch.rand(steps + 1, rows, 4, generator=g) * 2 - 1
    with torch.inference_mode():
        out = policy.rollout(obs.flatten(0, 1))
    return {
        C.OBS: obs,
        C.ACTION: out["action"].clone().view(steps + 1, rows, *out["action"].shape[1:]),
        C.REWARD: torch.randn(steps + 1, rows, generator=g),
        C.TERMINATED: torch.rand(steps + 1, rows, generator=g) < 0.05,
        C.TRUNCATED: torch.rand(steps + 1, rows, generator=g) < 0.05,
        C.POLICY_VERSION: torch.zeros(steps + 1, rows, dtype=torch.int64),
        C.LOG_PROB: out[C.LOG_PROB].clone().view(steps + 1, rows),
        C.VALUE: out[C.VALUE].clone().view(steps + 1, rows),
    }


def test_config_and_registry():
    assert registry.algorithms.get("appo").algorithm_cls is APPO
    assert registry.algorithms.get("impala").algorithm_cls is APPO
    assert APPOConfig().clip_ratio == 0.2 and IMPALAConfig().clip_ratio is None
    for bad in (dict(lr=0), dict(rho_bar=0), dict(c_bar=-1), dict(clip_ratio=0), dict(vtrace_lambda=2)):
        with pytest.raises(pydantic.ValidationError):
            APPOConfig(**bad)
    for name, field in APPOConfig.model_fields.items():
        assert field.description, f"{name} is undocumented"
    with pytest.raises(ConfigError, match="algo.rho_bar"):
        load_config("cartpole-appo", ["algo.rho_bar=-1"])
    with pytest.raises(TypeError, match="APPOConfig"):
        from srl.algos import PPOConfig

        APPO(ActorCriticMLP(OBS_SPACE, gym.spaces.Discrete(2)), PPOConfig(), 10)


def test_minibatches_split_segment_rows():
    with pytest.raises(ValueError, match="num_minibatches .5. exceeds the 4 segment rows"):
        APPO.check_batch(APPOConfig(num_minibatches=5), sample_length=32, rows=4)
    APPO.check_batch(APPOConfig(num_minibatches=4), sample_length=32, rows=4)


@pytest.mark.parametrize("clip_ratio", [0.2, None])
@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (2,), np.float32)])
def test_step_on_policy(clip_ratio, action_space):
    torch.manual_seed(0)
    policy = ActorCriticMLP(OBS_SPACE, action_space)
    batch = make_batch(policy)
    before = [p.detach().clone() for p in policy.parameters()]
    algo = APPO(policy, APPOConfig(clip_ratio=clip_ratio, anneal_lr=False), total_env_steps=100)
    stats = algo.step(batch, env_steps=0)
    assert stats["losses/approx_kl"] == pytest.approx(0.0, abs=1e-6)  # pi = mu before the step
    assert stats["losses/rho_clipfrac"] == 0.0 and stats["losses/clipfrac"] == 0.0
    assert stats["losses/value_loss"] > 0 and stats["losses/entropy"] > 0
    assert all(math.isfinite(v) for v in stats.values())
    assert all(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))

    stats = APPO(policy, APPOConfig(epochs=3, num_minibatches=2), total_env_steps=100).step(batch, 50)
    assert stats["charts/learning_rate"] == pytest.approx(0.5e-3)
    assert stats["losses/approx_kl"] > 0


@pytest.mark.parametrize("clip_ratio", [None, 0.2])
def test_loss_formulas_with_lagged_samples(clip_ratio):
    # gamma = 0: q_s = r_s, v_s = V + rho (r - V); ratios pi / mu from a stale behaviour policy
    reward, value, ratio = [1.0, -1.0, 2.0, -2.0], [0.5, 0.5, 1.0, -1.0], [1.5, 0.5, 1.1, 0.9]
    old = math.log(0.5)
    policy = ScriptedPolicy([old + math.log(r) for r in ratio] + [old], value + [7.0], entropy=0.5)
    batch = {
        C.OBS: torch.zeros(5, 1, 4),
        C.ACTION: torch.zeros(5, 1, dtype=torch.int64),
        C.REWARD: torch.tensor(reward + [0.0]).unsqueeze(1),
        C.TERMINATED: torch.zeros(5, 1, dtype=torch.bool),
        C.TRUNCATED: torch.zeros(5, 1, dtype=torch.bool),
        C.LOG_PROB: torch.full((5, 1), old),
    }
    config = APPOConfig(gamma=0.0, clip_ratio=clip_ratio, normalize_advantage=False, anneal_lr=False,
                        max_grad_norm=None, rho_bar=1.0)
    stats = APPO(policy, config, total_env_steps=1).step(batch, 0)

    rho = [min(1.0, r) for r in ratio]
    adv = [r - v for r, v in zip(reward, value)]  # [0.5, -1.5, 1.0, -1.0]
    if clip_ratio is None:  # -rho * A * log pi, per sample
        expected = [-p * a * (old + math.log(r)) for p, a, r in zip(rho, adv, ratio)]
    else:  # max(-A r, -A clip(r)): [max(-.75, -.6), max(.75, 1.2), -1.1, max(.9, .9)]
        expected = [-0.6, 1.2, -1.1, 0.9]
    assert stats["losses/policy_loss"] == pytest.approx(sum(expected) / 4)
    assert stats["losses/value_loss"] == pytest.approx(0.5 * sum((p * a) ** 2 for p, a in zip(rho, adv)) / 4)
    assert stats["losses/rho_clipfrac"] == pytest.approx(0.5)  # 1.5 and 1.1 exceed rho_bar
    assert stats["losses/entropy"] == pytest.approx(0.5)
    # gradient signs: log pi follows the advantage, except where APPO's clip binds (samples 0, 1)
    moved = (policy.log_prob.detach()[:4] - torch.tensor([old + math.log(r) for r in ratio])).sign().tolist()
    assert moved == ([1.0, -1.0, 1.0, -1.0] if clip_ratio is None else [0.0, 0.0, 1.0, -1.0])
    assert policy.log_prob.grad[4] == 0 and policy.value_.grad[4] == 0  # row T only bootstraps


def test_cartpole_appo_reaches_475_with_policy_lag(run_dir):
    config = load_config(
        "cartpole-appo", ["run.seed=1", "stop.total_env_steps=250000", f"run.run_dir={run_dir}", "monitor.display=off"]
    )
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episode_return_mean"] >= 475, summary
    assert summary["stop_reason"].startswith("target_return"), summary
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    lags = [m["policy_lag_mean"] for m in lines if m.get("policy_lag_mean") is not None]
    assert max(lags) > 1.0, "actors ran ahead of the trainer: samples were off-policy"
    assert {"losses/policy_loss", "losses/value_loss", "losses/rho_clipfrac"} <= set(lines[-1])
    assert (run_dir / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
