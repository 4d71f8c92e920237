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
    from srl.config import load_config

    config = load_config("pong-ppo", [])
    assert config.policy == "actor-critic-cnn" and config.env == "ALE/Pong-v5"
    assert config.algo_config.clip_coef == 0.1 and config.sample_length * config.envs_per_actor == 1024
