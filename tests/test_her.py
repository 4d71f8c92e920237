"""Hindsight experience replay (srl.data.her): relabelling by hand, the config's refusals, and
learning: BitFlipping with DQN + HER against plain DQN, and a FetchReach smoke run."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from srl.config import ConfigError
from srl.config.load import load_config
from srl.data import columns as C
from srl.data.her import LENGTH, STEP, EpisodeAssembler, HerReplayMemory
from srl.data.replay import batch_fields
from srl.envs.goals import GoalLayout, GoalObservation, goal_env_problem
from srl.graph import build_graph, space_spec
from srl.launch.run import run_experiment

# Test observations are [episode id | achieved code | desired code]: the achieved code of the
# observation at step t of episode e is CODE * e + t, so a goal says which episode and step it is from.
LAYOUT = GoalLayout(obs_size=1, goal_size=1)
CODE = 1000
UNSEEN = -1.0  # the desired goal every stored transition starts with
ORIGINAL_REWARD = 7.0  # what the env said: a relabelled row gets compute_reward's 0 or -1 instead


def reward_of(achieved: np.ndarray, desired: np.ndarray, info: Any) -> np.ndarray:
    return -(np.abs(achieved - desired) > 0.5).any(axis=-1).astype(np.float32)


def segment_of(episodes: list[int], lengths: list[int], T: int) -> dict[str, np.ndarray]:
    """A [T + 1, rows] segment: row r steps through episodes of `lengths[r]` steps (ids from
    episodes[r] up), each ended by a truncation."""
    rows = len(episodes)
    obs = np.zeros((T + 1, rows, 3), np.float32)
    truncated = np.zeros((T + 1, rows), np.float32)
    for r in range(rows):
        for t in range(T + 1):
            episode, step = episodes[r] + t // lengths[r], t % lengths[r]
            obs[t, r] = [episode, CODE * episode + step, UNSEEN]
            truncated[t, r] = step == lengths[r] - 1
    return {C.OBS: obs, C.ACTION: np.zeros((T + 1, rows), np.int64), C.REWARD: np.full((T + 1, rows), ORIGINAL_REWARD, np.float32),
            C.TERMINATED: np.zeros((T + 1, rows), np.float32), C.TRUNCATED: truncated}


def filled_memory(strategy: str, k: int = 4, lengths: tuple[int, ...] = (5, 7), T: int = 35) -> HerReplayMemory:
    obs, action = space_spec(gym.spaces.Box(-1e9, 1e9, (3,), np.float32)), space_spec(gym.spaces.Discrete(2))
    memory = HerReplayMemory({n: f for n, f in batch_fields(obs, action).items() if n in (C.OBS, C.ACTION, C.REWARD,
                             C.DISCOUNT, C.NEXT_OBS)}, 10_000, LAYOUT, reward_of, strategy, k, seed=3)
    assemble = EpisodeAssembler(gamma=0.9)
    memory.add(assemble(segment_of([0, 100], list(lengths), T), lane=("actor", 0)))
    return memory


def batch(memory: HerReplayMemory, size: int) -> dict[str, np.ndarray]:
    obs = space_spec(gym.spaces.Box(-1e9, 1e9, (3,), np.float32))
    out = {n: np.zeros((size, *f.shape), f.dtype) for n, f in batch_fields(obs, space_spec(gym.spaces.Discrete(2))).items()}
    memory.sample(out)
    return out


def relabelled_rows(out: dict[str, np.ndarray]) -> np.ndarray:
    return np.flatnonzero(out[C.OBS][:, 2] != UNSEEN)


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_goals_come_from_the_right_steps_of_the_rows_own_episode(strategy):
    memory = filled_memory(strategy)
    out = batch(memory, 4000)
    rows = relabelled_rows(out)
    assert len(rows) > 1000
    episode = out[C.OBS][rows, 0].astype(int)
    step = out[C.OBS][rows, 1].astype(int) - CODE * episode  # the transition's step t
    goal = out[C.OBS][rows, 2].astype(int)
    assert (goal // CODE == episode).all(), "a goal from another episode"
    goal_step = goal % CODE  # the goal is the achieved goal after step goal_step - 1
    length = np.where(episode >= 100, 7, 5)
    if strategy == "future":
        assert ((goal_step >= step + 1) & (goal_step <= length - 1)).all()
        assert set(goal_step[step == 0]) == set(range(1, 5)) | set(range(1, 7))  # every future step is drawn
    elif strategy == "final":
        assert (goal_step == length - 1).all()  # the last stored next observation of the episode
    else:
        assert ((goal_step >= 1) & (goal_step <= length - 1)).all()
        assert (goal_step <= step).any() and (goal_step > step + 1).any()  # past and future steps alike
    np.testing.assert_array_equal(out[C.NEXT_OBS][rows, 2], out[C.OBS][rows, 2])  # next_obs gets the same goal


def test_rewards_are_recomputed_for_relabelled_rows_only():
    out = batch(filled_memory("future"), 4000)
    rows = relabelled_rows(out)
    kept = np.setdiff1d(np.arange(4000), rows)
    expected = reward_of(out[C.NEXT_OBS][rows, 1:2], out[C.OBS][rows, 2:3], None)
    np.testing.assert_array_equal(out[C.REWARD][rows], expected)
    assert (expected == 0).any() and (expected == -1).any()  # the goal reached at the next step, and not
    assert (out[C.REWARD][kept] == ORIGINAL_REWARD).all()


@pytest.mark.parametrize("k", [1, 4])
def test_k_relabels_per_original_goal(k):
    out = batch(filled_memory("future", k=k), 8000)
    episode = out[C.OBS][:, 0].astype(int)
    step = out[C.OBS][:, 1].astype(int) - CODE * episode
    relabellable = step < np.where(episode >= 100, 7, 5) - 1
    share = (out[C.OBS][relabellable, 2] != UNSEEN).mean()
    assert abs(share - k / (k + 1)) < 0.03, share
    assert (out[C.OBS][~relabellable, 2] == UNSEEN).all(), "an episode's last transition keeps its goal"


def test_episodes_are_stored_whole_in_order_never_across_episodes_or_lanes():
    assemble = EpisodeAssembler(gamma=0.9)
    # row 0: episodes of 5 steps, row 1: of 7; 6 steps per segment, so episodes span segments
    first, second = segment_of([0, 100], [5, 7], 6), segment_of([0, 100], [5, 7], 12)
    second = {n: a[6:] for n, a in second.items()}  # steps 6..12: the continuation of `first`
    out = assemble(first, lane="a")
    assert len(out[C.REWARD]) == 5 and (out[C.OBS][:, 1] == np.arange(5)).all()  # row 0's episode 0
    assert assemble(segment_of([50], [5], 3), lane="b")[C.REWARD].size == 0  # another lane's running episode
    out = assemble(second, lane="a")
    code = out[C.OBS][:, 1].astype(int)
    np.testing.assert_array_equal(out[STEP], code % CODE)
    episodes = [list(code[code // CODE == e] % CODE) for e in (1, 100)]
    assert episodes == [list(range(5)), list(range(7))]  # each whole, in order: row 0's 2nd, row 1's 1st
    assert (out[LENGTH] == np.where(code // CODE == 100, 6, 4)).all()
    # within an episode next_obs is the next step's observation; the last one (truncated) bootstraps from itself
    inner = out[STEP] < out[LENGTH]
    np.testing.assert_array_equal(out[C.NEXT_OBS][inner, 1], out[C.OBS][inner, 1] + 1)
    np.testing.assert_array_equal(out[C.NEXT_OBS][~inner, 1], out[C.OBS][~inner, 1])
    assert assemble.running_steps() == 2 + 5 + 3  # row 0's 3rd episode, row 1's 2nd, lane b's


def test_a_goal_overwritten_in_the_ring_is_not_used():
    obs = space_spec(gym.spaces.Box(-1e9, 1e9, (3,), np.float32))
    small = HerReplayMemory({n: f for n, f in batch_fields(obs, space_spec(gym.spaces.Discrete(2))).items()
                             if n in (C.OBS, C.ACTION, C.REWARD, C.DISCOUNT, C.NEXT_OBS)}, 100, LAYOUT, reward_of,
                            "episode", 4, seed=0)
    small.add(EpisodeAssembler(0.9)(segment_of([0, 100], [40, 40], 80), lane=0))  # 160 steps into 100 slots
    out = batch(small, 4000)
    rows = relabelled_rows(out)
    assert len(rows) > 500
    goal_step = out[C.OBS][rows, 2].astype(int) % CODE
    episode = out[C.OBS][rows, 0].astype(int)
    assert (out[C.OBS][rows, 2].astype(int) // CODE == episode).all()
    stored = out[C.OBS][:, 0].astype(int)  # every sampled row's episode: its steps still in the ring
    oldest = {e: (out[C.OBS][stored == e, 1].astype(int) % CODE).min() for e in set(episode)}
    assert oldest[1] == 20 and oldest[100] == 0  # episode 1 lost its first 20 steps
    assert all((goal_step[episode == e] >= oldest[e] + 1).all() for e in oldest)  # no goal from a lost step


class NoRewardGoalEnv(gym.Env):
    observation_space = gym.spaces.Dict({k: gym.spaces.Box(0, 1, (2,)) for k in ("observation", "achieved_goal", "desired_goal")})
    action_space = gym.spaces.Discrete(2)


def test_goal_envs_need_the_three_keys_and_compute_reward():
    assert "keys observation, achieved_goal, desired_goal" in str(goal_env_problem(gym.make("CartPole-v1")))
    assert "compute_reward" in str(goal_env_problem(NoRewardGoalEnv()))
    with pytest.raises(ValueError, match="compute_reward"):
        GoalObservation(NoRewardGoalEnv())
    flat = GoalObservation(gym.make("BitFlipping-v0", n_bits=5))
    obs, _ = flat.reset(seed=0)
    assert obs.shape == (15,) and flat.observation_space.shape == (15,)
    np.testing.assert_array_equal(obs[flat.layout.achieved], obs[:5])  # the achieved goal is the state


@pytest.mark.parametrize(("overrides", "field"), [
    (["algorithm=ppo", "policy=actor-critic-mlp"], "field 'replay.her': hindsight relabelling needs an off-policy"),
    (["replay.n_step=3"], "field 'replay.n_step': 3 with replay.her"),
    (["replay.prioritized=true"], "field 'replay.prioritized': true with replay.her"),
    (["replay.her.strategy=later"], "replay.her.strategy"),
    (["replay.her.k=0"], "replay.her.k"),
])
def test_config_refusals(overrides, field):
    with pytest.raises(ConfigError) as info:
        load_config("bitflip-dqn-her", overrides)
    assert field in str(info.value)
    if "strategy" in field:
        assert "'future', 'final' or 'episode'" in str(info.value) or "future" in str(info.value)


def test_an_env_without_goals_is_refused_before_any_process_starts():
    config = load_config("bitflip-dqn-her", ["env=CartPole-v1"])
    config.env_kwargs = {}
    with pytest.raises(ConfigError, match="replay.her .hindsight relabelling. needs an env observing a Dict with keys"):
        build_graph(config)


def test_replay_her_flattens_the_goal_env_once():
    config = load_config("bitflip-dqn-her")
    assert [w.path for w in config.env_wrappers] == ["srl.envs.goals:GoalObservation"]
    again = load_config("bitflip-dqn-her", ["replay.her.k=2"])
    assert [w.path for w in again.env_wrappers] == ["srl.envs.goals:GoalObservation"]


def test_bitflipping_dqn_learns_with_her_and_not_without(tmp_path):
    """8 bits, 20k env steps, seed 1: with HER the last-100 mean return reached -4.06 (the
    flips needed average 4); without it -7.94 (a random policy's -8: almost no episode succeeds)."""
    returns = {}
    for her in ("on", "off"):
        run_dir = tmp_path / her
        extra = [] if her == "on" else ["replay.her=null"]  # the flattening wrapper stays in env_wrappers
        config = load_config("bitflip-dqn-her", ["run.seed=1", "stop.total_env_steps=20000", f"run.run_dir={run_dir}",
                                                 "monitor.display=off", *extra])
        assert (config.replay.her is not None) == (her == "on")
        assert run_experiment(config) == 0
        returns[her] = json.loads((run_dir / "summary.json").read_text())["episode_return_mean"]
    assert returns["on"] >= -5.0, returns
    # the run is asynchronous (not lock step): without HER a loaded CI run reached -7.45 once, a few
    # lucky episodes; still far from HER's
    assert returns["off"] <= -7.0 and returns["on"] - returns["off"] >= 2.0, returns


def test_fetchreach_sac_her_smoke(run_dir):
    config = load_config("fetchreach-sac-her", ["run.seed=0", "stop.total_env_steps=1000", "replay.warmup=300",
                                                "replay.replay_ratio=64", f"run.run_dir={run_dir}", "monitor.display=off"])
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] > 50 and summary["env_steps"] >= 1000, summary


def test_a_checkpoint_keeps_the_episode_columns_and_draws_the_same_goals():
    from srl.data.replay_state import memory_state, restore_memory

    saved = filled_memory("future")
    restored = filled_memory("future", lengths=(3, 3))  # other contents, overwritten by the restore
    restore_memory(restored, memory_state(saved))
    np.testing.assert_array_equal(restored.data[STEP], saved.data[STEP])
    np.testing.assert_array_equal(restored.data[LENGTH], saved.data[LENGTH])
    np.testing.assert_array_equal(batch(restored, 512)[C.OBS], batch(saved, 512)[C.OBS])
