"""Every algorithm takes every observation (issue 37, item 2): multi-input's encoders serve q-mlp
(DQN), squashed-gaussian-mlp and SAC's critics; a Dict observation travels through replay as a
column per leaf; an algorithm chosen alone brings its policy and a replay with a finite replay
ratio, which the buffer holds (counted on a slow env); where a Dict still cannot be learned from,
the error names what works."""

from __future__ import annotations

import json

import dict_obs_env  # noqa: F401  (registers srl-tests/ImageCue-v0)
import goal_env
import gymnasium as gym
import numpy as np
import pytest
import torch

from srl.algos.dqn import DQN, DQNConfig
from srl.algos.sac import SAC, SACConfig
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.data import columns as C
from srl.data.replay import ReplayMemory, batch_fields, segment_transitions, transition_fields
from srl.evaluate import evaluate_run
from srl.graph import build_graph
from srl.launch.run import run_experiment
from srl.models.qmlp import QMLP
from srl.models.squashed_gaussian import SquashedGaussianMLP
from srl.spaces import leaf_fields

GOAL, CUE = "srl-tests/PointGoal-v0", "srl-tests/ImageCue-v0"


def _batch(space: gym.Space, action_space: gym.Space, rows: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A replay batch of random transitions of `space` as the buffer serves it."""
    rng = np.random.default_rng(seed)
    fields = batch_fields(leaf_fields(space), leaf_fields(action_space)[""])
    out = {}
    for name, f in fields.items():
        if f.dtype == np.uint8:
            out[name] = torch.from_numpy(rng.integers(0, 256, (rows, *f.shape), dtype=np.uint8))
        elif np.issubdtype(f.dtype, np.integer):
            high = action_space.n if name == C.ACTION and isinstance(action_space, gym.spaces.Discrete) else 2
            out[name] = torch.from_numpy(rng.integers(0, high, (rows, *f.shape)).astype(f.dtype))
        else:
            out[name] = torch.from_numpy(rng.uniform(-1, 1, (rows, *f.shape)).astype(f.dtype))
    out[C.WEIGHT] = torch.ones(rows)
    out[C.DISCOUNT] = torch.full((rows,), 0.9)
    return out


# -- the policies and algorithms read Dict observations ---------------------------------------------


def test_q_mlp_and_dqn_read_a_dict_of_an_image_and_a_vector():
    space, actions = dict_obs_env.ImageCue.observation_space, gym.spaces.Discrete(4)
    policy = QMLP(space, actions, hidden_sizes=(32,))
    assert policy.encoder is not None and policy.encoder.chosen == {"image": "cnn", "vector": "mlp"}
    batch = _batch(space, actions, 16)
    assert "obs/image" in batch and "next_obs/image" in batch and batch["obs/image"].dtype == torch.uint8
    dqn = DQN(policy, DQNConfig(lr=1e-2), 1000)
    before = [p.detach().clone() for p in policy.encoder.parameters()]
    stats = dqn.step(batch, 0)
    assert np.isfinite(stats["losses/td_loss"]) and batch[C.PRIORITY].abs().sum() > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.encoder.parameters()))  # the CNN learns too
    obs = {"image": batch["obs/image"], "vector": batch["obs/vector"]}
    assert policy.rollout(obs)["action"].shape == (16,)


def test_sac_actor_and_both_critics_read_a_goal_dict():
    space, actions = goal_env.PointGoal.observation_space, goal_env.PointGoal.action_space
    policy = SquashedGaussianMLP(space, actions, hidden_sizes=(32, 32))
    sac = SAC(policy, SACConfig(critic_hidden_sizes=[32, 32]), 1000)
    assert sac.critic.encoder is not None and sac.critic.encoder is not policy.encoder  # the critics' own
    assert sac.critic.encoder.chosen == policy.encoder.chosen
    batch = _batch(space, actions, 32)
    critic_before = [p.detach().clone() for p in sac.critic.encoder.parameters()]
    stats = sac.step(batch, 0)
    assert all(np.isfinite(v) for v in stats.values()), stats
    assert any(not torch.equal(a, b) for a, b in zip(critic_before, sac.critic.encoder.parameters()))
    obs = {k: batch[f"obs/{k}"] for k in ("achieved_goal", "desired_goal", "observation")}
    action = policy.rollout(obs)["action"]
    assert action.shape == (32, 2) and (action.abs() <= 1).all()


def test_a_box_observation_keeps_its_parameters_as_before():
    """No encoder for a Box: the checkpoints of Box runs load as they did."""
    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    assert set(QMLP(box, gym.spaces.Discrete(2)).state_dict()) == {"net.0.weight", "net.0.bias", "net.2.weight",
                                                                   "net.2.bias", "net.4.weight", "net.4.bias"}
    sac = SAC(SquashedGaussianMLP(box, gym.spaces.Box(-1, 1, (1,))), SACConfig(), 100)
    assert sac.critic.encoder is None and all(k.startswith(("q1.", "q2.")) for k in sac.critic.state_dict())


def test_replay_stores_a_column_per_leaf_and_side():
    leaves = leaf_fields(goal_env.PointGoal.observation_space)
    fields = transition_fields(leaves, leaf_fields(goal_env.PointGoal.action_space)[""])
    assert {"obs/desired_goal", "next_obs/desired_goal", "obs/observation", "next_obs/achieved_goal"} <= set(fields)
    assert C.OBS not in fields
    T, rows = 4, 2
    goal = np.arange((T + 1) * rows * 2, dtype=np.float32).reshape(T + 1, rows, 2)
    segment = {"obs/desired_goal": goal, "obs/achieved_goal": goal + 100, "obs/observation": goal + 200,
               C.ACTION: np.zeros((T + 1, rows, 2), np.float32), C.REWARD: np.ones((T + 1, rows), np.float32),
               C.TERMINATED: np.zeros((T + 1, rows), bool), C.TRUNCATED: np.zeros((T + 1, rows), bool)}
    out = segment_transitions(segment, gamma=0.5, n=1)
    np.testing.assert_array_equal(out["obs/desired_goal"], goal[:T].reshape(T * rows, 2))
    np.testing.assert_array_equal(out["next_obs/desired_goal"], goal[1:].reshape(T * rows, 2))
    memory = ReplayMemory(fields, 64)
    memory.add(out)
    assert memory.size == T * rows


# -- defaults of an algorithm chosen alone -----------------------------------------------------------


@pytest.mark.parametrize("algorithm,env,policy,updates_per_item", [
    ("dqn", "CartPole-v1", "q-mlp", 0.25), ("sac", "Pendulum-v1", "squashed-gaussian-mlp", 1.0),
    ("r2d2", "CartPole-v1", "recurrent-q", 0.5),
])
def test_an_algorithm_alone_brings_its_policy_and_a_finite_replay_ratio(algorithm, env, policy, updates_per_item):
    config = build_config({"algorithm": algorithm, "env": env})
    assert config.policy == policy and config.replay is not None
    assert config.replay.replay_ratio / config.replay.batch_size == updates_per_item
    build_graph(config)  # the policy fits the algorithm and the env
    if algorithm == "sac":  # SAC's replay is uniform and 1-step (the entropy of intermediate steps)
        assert not config.replay.prioritized and config.replay.n_step == 1


def test_a_replay_given_in_part_takes_the_rest_from_the_algorithm():
    empty = build_config({"algorithm": "dqn", "replay": {}}).replay
    assert empty is not None and empty.replay_ratio == 32.0  # `replay: {}` had none: as fast as the trainer went
    half = build_config({"algorithm": "sac", "env": "Pendulum-v1", "replay": {"batch_size": 64, "warmup": 100}}).replay
    assert half is not None and (half.batch_size, half.replay_ratio, half.n_step, half.prioritized) == (64, 64.0, 1, False)
    unbounded = build_config({"algorithm": "dqn", "replay": {"replay_ratio": None}}).replay
    assert unbounded is not None and unbounded.replay_ratio is None  # asked for on purpose
    kept = build_config({"algorithm": "dqn", "policy": "q-mlp", "replay": {"replay_ratio": 8, "batch_size": 32}}).replay
    assert kept is not None and (kept.replay_ratio, kept.batch_size) == (8.0, 32)
    with pytest.raises(ConfigError, match="field 'replay'.*must not exceed capacity"):
        build_config({"algorithm": "dqn", "replay": {"capacity": 64}})
    assert build_config({"algorithm": "ppo"}).replay is None  # on-policy: nothing added


# -- a Dict observation where it still cannot be used: what works ------------------------------------


def test_the_errors_for_a_dict_name_what_works():
    with pytest.raises(ConfigError) as e:
        build_graph(build_config({"algorithm": "dqn", "env": CUE, "policy": "agent-q", "modules": ["dict_obs_env"]}))
    assert "policy=q-mlp with algorithm 'dqn'" in str(e.value) and "multi-input" not in str(e.value)
    with pytest.raises(ConfigError, match="policy=multi-input with algorithm 'ppo'"):
        build_graph(build_config({"algorithm": "ppo", "env": CUE, "policy": "actor-critic-cnn", "modules": ["dict_obs_env"]}))
    with pytest.raises(ConfigError) as e:
        build_graph(build_config({"algorithm": "r2d2", "env": CUE, "modules": ["dict_obs_env"]}))
    assert "gymnasium.wrappers.FlattenObservation" in str(e.value) and "multi-input" not in str(e.value)
    # and the wrapper named does make it one Box that r2d2's policy reads
    build_graph(build_config({"algorithm": "r2d2", "env": CUE, "modules": ["dict_obs_env"],
                              "env_wrappers": ["gymnasium.wrappers.FlattenObservation"]}))


# -- learning and the replay ratio held, through the real dataflow ------------------------------------


def test_sac_learns_a_dict_goal_env_with_no_wrapper(run_dir):
    """Random play scores about -16 per episode on PointGoal, heading straight for the goal about -4;
    SAC with its defaults (smaller networks and batches, for the budget) and no wrapper, played
    deterministically after 4,000 env steps, must be far nearer the second (seed 1: -5.4)."""
    config = build_config({
        "modules": ["goal_env"], "env": GOAL, "algorithm": "sac", "launch": {"launcher": "inline"},
        "stop": {"total_env_steps": 4000}, "run": {"run_dir": str(run_dir), "seed": 1},
        "dataflow": {"envs_per_actor": 4, "sample_length": 16}, "monitor": {"display": "off"},
        "policy_kwargs": {"hidden_sizes": [64, 64]},
        "algo": {"critic_hidden_sizes": [64, 64], "actor_lr": 1e-3, "critic_lr": 1e-3},
        "replay": {"batch_size": 64, "warmup": 256, "gamma": 0.9, "replay_ratio": 32},
    })
    assert config.policy == "squashed-gaussian-mlp"
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["info"]["info/is_success"] is not None  # goal envs' success rate, by default
    played = evaluate_run(run_dir, episodes=20, seed=0)  # reads the Dict observation too
    assert played["return_mean"] >= -9.0, played


def test_the_replay_ratio_bounds_updates_per_env_step_on_a_slow_env(run_dir):
    """dqn alone on an env of 2 ms a step: the trainer could make hundreds of updates per env step;
    the default ratio (one update of 128 per 4 stored transitions) holds them to it."""
    config = build_config({
        "modules": ["goal_env"], "env": "srl-tests/SlowGoal-v0", "env_wrappers": [
            {"path": "gymnasium.wrappers.FlattenObservation"},
            {"path": "gymnasium.wrappers.DiscretizeAction", "kwargs": {"bins": 3}}],
        "algorithm": "dqn", "launch": {"launcher": "inline"}, "stop": {"total_env_steps": 3000},
        "run": {"run_dir": str(run_dir), "seed": 0}, "dataflow": {"envs_per_actor": 2, "sample_length": 16},
        "monitor": {"display": "off"}, "replay": {"warmup": 500},
    })
    replay = config.replay
    assert replay is not None and replay.replay_ratio == 32.0
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    stored_at_most = summary["env_steps"] - replay.warmup
    bound = replay.replay_ratio / replay.batch_size * stored_at_most + replay.batch_slots
    assert summary["updates"] <= bound, (summary["updates"], bound)
    # the actors may run ahead of what is stored by their segment slots (2 x 2 envs x 16 steps)
    slack = 2 * config.dataflow.envs_per_actor * config.dataflow.sample_length
    assert summary["updates"] >= 0.8 * replay.replay_ratio / replay.batch_size * (stored_at_most - slack), summary
