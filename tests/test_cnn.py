"""actor-critic-cnn: shapes, rollout and analyze agree, gradients reach the trunk; pong-ppo config."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl.models.cnn import ActorCriticCNN


@pytest.mark.parametrize("shape", [(84, 84), (4, 84, 84)])
def test_rollout_and_analyze_agree(shape):
    torch.manual_seed(0)
    policy = ActorCriticCNN(gym.spaces.Box(0, 255, shape, np.uint8), gym.spaces.Discrete(6))
    obs = torch.randint(0, 256, (5, *shape)).float()
    out = policy.rollout(obs)
    assert out["action"].shape == (5,) and out["action"].min() >= 0 and out["action"].max() < 6
    again = policy.analyze(obs, out["action"])
    torch.testing.assert_close(again["log_prob"], out["log_prob"])
    torch.testing.assert_close(again["value"], out["value"])
    assert (again["entropy"] > 1.7).all()  # near-uniform at init: log 6 = 1.79 (head gain 0.01)
    (again["log_prob"].sum() + again["value"].sum()).backward()
    assert policy.trunk[0].weight.grad.abs().sum() > 0


def test_refuses_what_it_cannot_act_on():
    with pytest.raises(TypeError, match="image observations"):
        ActorCriticCNN(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2))
    with pytest.raises(TypeError, match="Discrete"):
        ActorCriticCNN(gym.spaces.Box(0, 255, (84, 84)), gym.spaces.Box(-1, 1, (2,)))
    with pytest.raises(ValueError, match="36x36"):
        ActorCriticCNN(gym.spaces.Box(0, 255, (16, 16)), gym.spaces.Discrete(2))


def test_pong_ppo_config_is_valid():
    from srl.config.load import load_config

    config = load_config("pong-ppo", [])
    assert config.policy == "actor-critic-cnn" and config.env == "ALE/Pong-v5"
    assert config.algo_config.clip_coef == 0.1 and config.dataflow.sample_length * config.dataflow.envs_per_actor == 1024


# -- mixed precision: the bfloat16 trunk ------------------------------------------------------------


def _trunk_output_dtypes(policy, obs):
    """The dtype each trunk layer computed in, recorded by forward hooks."""
    seen = []
    hooks = [layer.register_forward_hook(lambda m, i, o: seen.append(o.dtype)) for layer in policy.trunk]
    try:
        policy.rollout(obs)
    finally:
        for hook in hooks:
            hook.remove()
    return seen


def test_bfloat16_trunk_computes_in_bfloat16_and_stays_close_to_float32():
    torch.manual_seed(0)
    spaces = (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
    full = ActorCriticCNN(*spaces)
    mixed = ActorCriticCNN(*spaces, trunk_precision="bfloat16")
    mixed.load_state_dict(full.state_dict())
    obs = torch.randint(0, 256, (16, 4, 84, 84), dtype=torch.uint8)

    assert set(_trunk_output_dtypes(full, obs)) == {torch.float32}
    assert set(_trunk_output_dtypes(mixed, obs)) == {torch.bfloat16}
    out = mixed.rollout(obs)
    assert out["log_prob"].dtype == out["value"].dtype == torch.float32  # heads in float32
    again = mixed.analyze(obs, out["action"])  # acting and training agree exactly
    torch.testing.assert_close(again["log_prob"], out["log_prob"])
    torch.testing.assert_close(again["value"], out["value"])
    reference = full.analyze(obs, out["action"])  # and are float32's up to bfloat16 rounding
    assert not torch.equal(reference["value"], again["value"])
    torch.testing.assert_close(again["value"], reference["value"], atol=0.05, rtol=0.05)
    torch.testing.assert_close(again["log_prob"], reference["log_prob"], atol=0.01, rtol=0.01)

    (again["log_prob"].sum() + again["value"].sum()).backward()  # float32 master weights and grads
    for name, p in mixed.named_parameters():
        assert p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32, name
        assert p.grad.abs().sum() > 0, name


def test_trunk_precision_is_checked_and_auto_follows_the_hardware():
    from srl.config import ConfigError
    from srl.config.load import load_config
    from srl.graph import build_graph
    from srl.models.cnn import native_bfloat16

    spaces = (gym.spaces.Box(0, 255, (84, 84), np.uint8), gym.spaces.Discrete(6))
    with pytest.raises(ValueError, match=r"trunk_precision must be one of \['float32', 'bfloat16', 'auto'\]"):
        ActorCriticCNN(*spaces, trunk_precision="fp8")
    config = load_config("pong-ppo", ['policy_kwargs={"trunk_precision": "fp8"}'])
    with pytest.raises(ConfigError, match="field 'policy_kwargs'.*trunk_precision"):
        build_graph(config)

    obs = torch.zeros(2, 84, 84, dtype=torch.uint8)
    auto = set(_trunk_output_dtypes(ActorCriticCNN(*spaces, trunk_precision="auto"), obs))
    assert auto == {torch.bfloat16 if native_bfloat16("cpu") else torch.float32}
    assert native_bfloat16("cpu") == any(
        getattr(torch.cpu, probe, lambda: False)() for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    )


def _side_bandit(rng, rows):
    """36x36 frames with a bright 12x12 patch in the left or the right half; the action that names
    the half earns 1, the other 0 (one-step episodes)."""
    side = rng.integers(0, 2, rows)
    frames = rng.integers(0, 40, (rows, 36, 36)).astype(np.uint8)
    for i, s in enumerate(side):
        top, left = rng.integers(0, 24), rng.integers(0, 6) + 18 * s
        frames[i, top:top + 12, left:left + 12] = 255
    return torch.from_numpy(frames), torch.from_numpy(side)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_ppo_learns_an_image_task_with_either_trunk(precision):
    """PPO through the CNN learns to name the bright half of a frame: the untrained greedy policy
    earns about 0.5 (0.3-0.6 over seeds 3-6), and must earn >= 0.95 after 10 updates of 8 x 32
    one-step episodes (both precisions reached 1.0 within 2 updates on seeds 3-6)."""
    from srl.algos import PPO, PPOConfig
    from srl.data import columns as C

    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    policy = ActorCriticCNN(gym.spaces.Box(0, 255, (36, 36), np.uint8), gym.spaces.Discrete(2), trunk_precision=precision)
    ppo = PPO(policy, PPOConfig(lr=1e-3, epochs=4, num_minibatches=4, gamma=0.0, anneal_lr=False), 0)
    steps, rows = 8, 32

    def greedy_score():
        frames, side = _side_bandit(rng, 512)
        with torch.inference_mode():
            return (policy.rollout(frames, deterministic=True)["action"] == side).float().mean().item()

    assert greedy_score() < 0.8
    for update in range(10):
        frames, side = _side_bandit(rng, (steps + 1) * rows)
        with torch.inference_mode():
            out = {k: v.clone() for k, v in policy.rollout(frames).items()}
        batch = {
            C.OBS: frames.view(steps + 1, rows, 36, 36),
            C.ACTION: out["action"].view(steps + 1, rows),
            C.REWARD: (out["action"] == side).float().view(steps + 1, rows),
            C.TERMINATED: torch.ones(steps + 1, rows, dtype=torch.bool),
            C.TRUNCATED: torch.zeros(steps + 1, rows, dtype=torch.bool),
            C.LOG_PROB: out[C.LOG_PROB].view(steps + 1, rows),
            C.VALUE: out[C.VALUE].view(steps + 1, rows),
        }
        ppo.step(batch, update * steps * rows)
    assert greedy_score() >= 0.95
