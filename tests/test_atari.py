"""Atari ids: the standard preprocessing through make_vector_env, and a clear error without the extra."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from srl.envs import make_vector_env


def test_missing_ale_py_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)  # makes `import ale_py` fail
    with pytest.raises(ImportError, match=r"srl\[atari\]"):
        make_vector_env("ALE/Pong-v5", {}, num_envs=1)


def test_pong_steps_84x84_grayscale_frames_four_at_a_time():
    venv = make_vector_env("ALE/Pong-v5", {}, num_envs=2)
    try:
        env = venv.envs[0]
        assert env.observation_space.shape == (84, 84) and env.unwrapped._frameskip == 1
        assert env.frame_skip == 4 and env.noop_max == 30
        obs = venv.reset(seed=3)
        assert obs.shape == (2, 84, 84) and obs.dtype == np.uint8 and obs.min() >= 0 and obs.max() <= 255
        frames = env.unwrapped.ale.getEpisodeFrameNumber()
        venv.step(np.zeros(2, np.int64))
        assert env.unwrapped.ale.getEpisodeFrameNumber() - frames == 4
    finally:
        venv.close()


def test_pong_ppo_steps_pong_without_sticky_actions():
    """pong-ppo turns v5's sticky actions off (the PPO paper's protocol); the emulator must see it."""
    from srl.config.load import load_config

    config = load_config("pong-ppo", [])
    venv = make_vector_env(config.env, config.env_kwargs, num_envs=1)
    try:
        ale = venv.envs[0].unwrapped.ale
        assert ale.getFloat("repeat_action_probability") == 0.0
        assert venv.reset(seed=3).shape == (1, 4, 84, 84)
    finally:
        venv.close()
