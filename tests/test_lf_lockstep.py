"""benchmarks/lf_lockstep.py steps the same Atari env on every side: Ray's actors and srl's
env paths (srl_actor, srl_dataflow, srl_envpool) must build identical envs for each --atari-obs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import lf_lockstep as LF  # noqa: E402

from srl.envs import make_vector_env  # noqa: E402


@pytest.mark.parametrize("atari_obs", LF.ATARI_OBS)
def test_srl_steps_the_frames_rays_actors_step(atari_obs):
    """Same seed, same actions: srl's env gives Ray's env's frames, uint8, step for step."""
    ray_side = LF._make_gym(LF.ATARI_ID, atari_obs)
    name, kwargs = LF.srl_env(LF.ATARI_ID, atari_obs)
    srl_side = make_vector_env(name, kwargs, num_envs=1)
    try:
        expected = ray_side.reset(seed=5)[0]
        got = srl_side.reset(seed=5)
        assert got.dtype == np.uint8 and got.shape == (1, *expected.shape)
        assert expected.shape == ((210, 160, 3) if atari_obs == "raw" else (84, 84))
        for action in [0, 2, 3, 2, 3, 1] * 5:
            expected = ray_side.step(action)[0]
            got = srl_side.step(np.array([action])).obs
            np.testing.assert_array_equal(got[0], expected)
    finally:
        ray_side.close()
        srl_side.close()


@pytest.mark.parametrize("atari_obs", LF.ATARI_OBS)
def test_envpool_side_has_the_same_frame_size_and_colour(atari_obs):
    ray_side = LF._make_gym(LF.ATARI_ID, atari_obs)
    venv = make_vector_env(LF.ATARI_ID, LF.envpool_kwargs(atari_obs), num_envs=2, backend="envpool")
    try:
        frame = ray_side.reset(seed=1)[0]
        obs = venv.reset(seed=1)
        # raw: EnvPool gives [3, 210, 160] where gymnasium gives [210, 160, 3], the same bytes
        assert obs.dtype == np.uint8 and obs[0].size == frame.size
        assert sorted(obs.shape[1:]) == sorted(frame.shape)
        assert venv.action_space == ray_side.action_space
    finally:
        ray_side.close()
        venv.close()
