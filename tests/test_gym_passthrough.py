"""srl.envs.gym_passthrough: GymVectorEnv steps past gymnasium's wrappers only once they pass through."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import ResetNeeded
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

from srl.envs import GymVectorEnv
from srl.envs.gym_passthrough import stepper


def test_a_fresh_chain_is_not_skipped_until_reset_and_checked():
    env = gym.make("CartPole-v1")  # TimeLimit(OrderEnforcing(PassiveEnvChecker(CartPoleEnv)))
    first = stepper(env)
    assert first.time_limit is env and not first.settled
    assert first.step.__self__ is env.env  # OrderEnforcing: not reset yet, so it must run
    env.reset(seed=0)
    assert type(stepper(env).step.__self__) is PassiveEnvChecker  # its checks are still to come
    env.step(0)
    env.step(1)
    settled = stepper(env)
    assert settled.settled and settled.step.__self__ is env.unwrapped and settled.time_limit is env


def test_subclasses_and_unknown_wrappers_are_called():
    class Counting(OrderEnforcing):
        pass

    inner = gym.make("CartPole-v1", disable_env_checker=True).unwrapped
    env = TimeLimit(gym.wrappers.ClipReward(Counting(inner), 0.0, 0.5), 7)
    env.reset(seed=0)
    s = stepper(env)
    assert s.settled and s.time_limit is env and type(s.step.__self__) is gym.wrappers.ClipReward


def test_step_before_reset_still_raises():
    venv = GymVectorEnv.make("CartPole-v1", 3)
    with pytest.raises(ResetNeeded):
        venv.step(np.zeros(3, np.int64))


def test_time_limit_counters_follow_the_wrapped_env():
    """The counting GymVectorEnv does for TimeLimit is TimeLimit's own: truncation at the limit,
    and the wrapper's counter equal to the steps of the episode so far."""
    venv = GymVectorEnv.make("CartPole-v1", 4, max_episode_steps=5)
    venv.reset(seed=3)
    lengths = np.zeros(4, np.int64)
    truncations = 0
    for _ in range(40):
        st = venv.step(np.ones(4, np.int64) * (lengths % 2))  # alternate: episodes reach the limit
        lengths += 1
        assert not (st.truncated & (lengths != 5)).any()
        truncations += int(st.truncated.sum())
        lengths[st.terminated | st.truncated] = 0
        assert [env._elapsed_steps for env in venv.envs] == lengths.tolist()
    assert truncations > 10
    assert all(stepper(env).settled for env in venv.envs)


@pytest.mark.parametrize("ends", ["terminated", "truncated"])
@pytest.mark.parametrize("launcher,extra", [("inline", {}), ("local", {"inference": "inline"})])
def test_dataflow_with_the_loop_backend_delivers_every_transition_once(ends, launcher, extra, run_dir):
    """srl/Counting-v0 through GymVectorEnv and gymnasium.make's wrappers: episodes the env ends
    itself (terminated) or that only TimeLimit ends (truncated), every transition exactly once."""
    from recording import load_batches
    from test_pipeline import EPISODE_LENGTH, counting_config

    from srl.launch.run import run_experiment
    from srl.testing import check_counts
    from srl.testing.counting_gym import ID

    kwargs = {"episode_length": EPISODE_LENGTH} if ends == "terminated" else {
        "episode_length": 0, "max_episode_steps": EPISODE_LENGTH}
    config = counting_config(launcher, run_dir, env=ID, env_kwargs=kwargs, env_backend="loop", **extra)
    assert run_experiment(config) == 0
    batches = load_batches(run_dir / "batches")
    other = "truncated" if ends == "terminated" else "terminated"
    assert not any(b[other].any() for b in batches)
    totals = check_counts([b["obs"] for b in batches], [b[ends] for b in batches], EPISODE_LENGTH)
    assert totals["envs"] == 2 * 4 and totals["transitions"] >= 2000, totals
    assert totals["completed_episodes"] > 100, totals
