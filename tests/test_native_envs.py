"""Natively batched envs (srl.envs.native): same-step auto-reset over next-step backends, checked
by counting (no transition lost or duplicated), CartPole's vector entry point, EnvPool, config."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from srl.config import ConfigError
from srl.config.checks import build_config
from srl.envs import make_vector_env
from srl.envs.native import NativeVectorEnv
from srl.testing import check_counts
from srl.testing.counting_vector import ID as COUNTING
from srl.testing.counting_vector import CountingVectorEnv


def rollout(venv, steps: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """obs [steps + 1, rows, ...] and reward, terminated, truncated [steps + 1, rows] (row t = after
    step t; the last row's flags are zero), as an actor records them."""
    rng = np.random.default_rng(seed)
    obs, rew, term, trunc = [venv.reset(seed=seed).copy()], [], [], []
    for _ in range(steps):
        out = venv.step(rng.integers(0, 2, venv.num_rows))
        obs.append(out.obs.copy())
        rew.append(out.reward.copy())
        term.append(out.terminated.copy())
        trunc.append(out.truncated.copy())
    zeros = np.zeros_like(rew[0])
    return np.stack(obs), np.stack(rew + [zeros]), np.stack(term + [zeros.astype(bool)]), np.stack(trunc + [zeros.astype(bool)])


class RawNextStep:
    """The backend's own next-step output, unconverted: what srl must NOT hand to the actor."""

    def __init__(self, env: CountingVectorEnv) -> None:
        self.env, self.num_rows = env, env.num_envs

    def reset(self, seed: int) -> np.ndarray:
        return self.env.reset(seed=seed)[0]

    def step(self, actions):
        from srl.api.env import VectorStep

        return VectorStep(*self.env.step(actions)[:4])


def test_counting_vector_env_through_native_has_every_transition_once():
    venv = make_vector_env(COUNTING, {"episode_length": 4}, num_envs=5, backend="vector")
    assert isinstance(venv, NativeVectorEnv)
    obs, reward, term, trunc = rollout(venv, 43)
    totals = check_counts([obs], [term], 4)
    assert totals["transitions"] == 43 * 5 and totals["envs"] == 5
    assert (reward[:-1] == 1.0).all() and not trunc.any()  # every step is a real one


def test_raw_next_step_output_fails_the_count():
    obs, _, term, _ = rollout(RawNextStep(CountingVectorEnv(num_envs=3, episode_length=4)), 20)
    with pytest.raises(AssertionError):
        check_counts([obs], [term], 4)


def test_truncation_is_reported_and_the_next_episode_starts_on_the_same_step():
    venv = make_vector_env(COUNTING, {"episode_length": 3, "truncate": True}, num_envs=2, backend="vector")
    obs, reward, term, trunc = rollout(venv, 9)
    assert not term.any()
    assert trunc[2].all() and trunc[5].all() and trunc[8].all() and trunc.sum() == 6
    assert (obs[3, :, 1] == 1).all() and (obs[3, :, 2] == 0).all()  # episode 1, step 0 right after
    assert (reward[:-1] == 1.0).all()


def test_cartpole_vector_backend_resets_on_the_same_step():
    venv = make_vector_env("CartPole-v1", {}, num_envs=16, backend="auto")
    assert isinstance(venv, NativeVectorEnv)
    obs, reward, term, trunc = rollout(venv, 200)
    assert obs.dtype == np.float32 and obs.shape == (201, 16, 4)
    ended = term | trunc
    assert ended[:-1].sum() > 16  # random actions end episodes after ~20 steps
    starts = obs[1:][ended[:-1]]
    assert (np.abs(starts) <= 0.05).all()  # a fresh start state, not the terminal one
    assert (reward[:-1] == 1.0).all()  # no dead reset step with reward 0


def test_auto_keeps_the_loop_for_other_envs_and_kwargs():
    from srl.envs import GymVectorEnv

    assert isinstance(make_vector_env("Acrobot-v1", {}, 2, backend="auto"), GymVectorEnv)
    assert isinstance(make_vector_env("CartPole-v1", {"max_episode_steps": 50}, 2, backend="auto"), GymVectorEnv)
    assert isinstance(make_vector_env("CartPole-v1", {}, 2, backend="loop"), GymVectorEnv)


def test_envpool_cartpole_resets_on_the_same_step():
    venv = make_vector_env("CartPole-v1", {}, num_envs=8, backend="envpool")
    obs, reward, term, trunc = rollout(venv, 150, seed=3)
    ended = term | trunc
    assert ended[:-1].sum() > 8
    assert (np.abs(obs[1:][ended[:-1]]) <= 0.05).all()
    assert (reward[:-1] == 1.0).all()
    again = rollout(make_vector_env("CartPole-v1", {}, num_envs=8, backend="envpool"), 150, seed=3)[0]
    np.testing.assert_array_equal(obs, again)  # seeded by reset(seed)


def test_config_names_the_backend_and_what_to_do(monkeypatch):
    with pytest.raises(ConfigError, match="'env_backend': 'vector' needs.*Acrobot-v1.*env_backend='loop'"):
        build_config({"experiment": "x", "env": "Acrobot-v1", "env_backend": "vector"})
    with pytest.raises(ConfigError, match="env_backend"):
        build_config({"experiment": "x", "env_backend": "numba"})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "envpool" else real(name, *a))
    with pytest.raises(ConfigError, match=r"pip install 'srl\[envpool\]'"):
        build_config({"experiment": "x", "env_backend": "envpool"})


@pytest.mark.parametrize("launcher,extra", [("inline", {}), ("local", {"inference": "inline"}), ("local", {})])
def test_dataflow_with_the_vector_backend_delivers_every_transition_once(launcher, extra, run_dir):
    import json

    from recording import load_batches
    from test_pipeline import EPISODE_LENGTH, counting_config

    from srl.launch.run import run_experiment

    config = counting_config(launcher, run_dir, env=COUNTING, env_backend="vector", **extra)
    assert run_experiment(config) == 0
    batches = load_batches(run_dir / "batches")
    totals = check_counts([b["obs"] for b in batches], [b["terminated"] for b in batches], EPISODE_LENGTH)
    assert totals["envs"] == 2 * 4 and totals["transitions"] >= 2000, totals
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["episode_return_mean"] == pytest.approx(EPISODE_LENGTH)


def test_envpool_atari_matches_srl_atari_spaces():
    venv = make_vector_env("ALE/Pong-v5", {}, num_envs=2, backend="envpool")
    try:
        assert venv.observation_space.shape == (84, 84) and venv.action_space.n == 6
        obs = venv.reset(seed=1)
        assert obs.shape == (2, 84, 84) and obs.dtype == np.uint8 and obs.max() > 0
        out = venv.step(np.array([0, 1]))
        assert out.obs.shape == (2, 84, 84) and out.reward.shape == (2,)
    finally:
        venv.close()
    stacked = make_vector_env("ALE/Pong-v5", {"frame_stack": 4}, num_envs=1, backend="envpool")
    assert stacked.observation_space.shape == (4, 84, 84)
    stacked.close()


def test_one_env_of_an_envpool_run_leaves_envpools_thread_knobs_out():
    """An evaluation actor and `srl eval` build one env of the run with the loop backend, which
    does not know EnvPool's `num_threads`; what the env is (frame_stack, sticky actions) stays."""
    from srl.envs import single_env_kwargs

    run_kwargs = {"frame_stack": 4, "repeat_action_probability": 0.0, "num_threads": 2, "thread_affinity_offset": 0}
    assert single_env_kwargs(run_kwargs, "envpool") == {"frame_stack": 4, "repeat_action_probability": 0.0}
    assert single_env_kwargs(run_kwargs, "loop") == run_kwargs
    venv = make_vector_env("ALE/Pong-v5", single_env_kwargs(run_kwargs, "envpool"), num_envs=1)
    assert venv.observation_space.shape == (4, 84, 84)
    venv.close()
