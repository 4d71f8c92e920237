"""The experiments tuned against rl-baselines3-zoo (srl/experiments/tuned.py) and the pure parts of
their benchmark (benchmarks/tuned_vs_sb3.py).

CI-sized: every tuned experiment validates and builds its graph (its env made, its policy checked
against the spaces), its envs step through the experiment's own wrappers, and a tiny run of
lunarlander-ppo (a fixed seed, a 2048-step budget) completes and writes its metrics. Learning
to the zoo's scores takes minutes to hours: benchmarks/tuned_vs_sb3.py, docs/results.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from srl.config import show_config
from srl.config.load import load_config
from srl.envs import make_vector_env
from srl.experiments import tuned
from srl.graph import build_graph

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import _sb3_tuned  # noqa: E402
import tuned_vs_sb3  # noqa: E402

EXPERIMENTS = {
    "lunarlander-ppo": "LunarLander-v3",
    "lunarlander-continuous-sac": "LunarLanderContinuous-v3",
    "mountaincar-continuous-sac": "MountainCarContinuous-v0",
    "minigrid-doorkey8-ppo": "MiniGrid-DoorKey-8x8-v0",
    "bipedalwalker-ppo": "BipedalWalker-v3",
    "hopper-ppo": "Hopper-v5",
}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_tuned_experiment_builds_with_its_target(name):
    config = load_config(name, ["run.seed=3"])
    assert config.env == EXPERIMENTS[name]
    assert config.stop.target_return == tuned.ZOO_SCORES.get(config.env, tuned.DOORKEY8_TARGET)
    graph = build_graph(config)  # makes the env (Box2D, MuJoCo, MiniGrid) and checks the policy on its spaces
    assert graph.observation_space.shape and graph.action_space is not None
    assert f"env: {config.env}" in show_config(config)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_tuned_envs_step_through_their_wrappers(name):
    config = load_config(name, [])
    envs = make_vector_env(config.env, config.env_kwargs, 2, wrappers=config.env_wrappers)
    try:
        obs = envs.reset(seed=7)
        space = envs.action_space
        rng = np.random.default_rng(7)
        for _ in range(5):
            if hasattr(space, "n"):
                action = rng.integers(0, space.n, size=2)
            else:
                action = rng.uniform(space.low, space.high, size=(2, *space.shape)).astype(np.float32)
            step = envs.step(action)
            assert np.all(np.isfinite(step.reward)) and np.all(np.isfinite(step.obs))
        assert obs.shape[0] == 2 and step.obs.shape == obs.shape
    finally:
        envs.close()


def test_doorkey8_sees_one_hot_cells():
    config = load_config("minigrid-doorkey8-ppo", [])
    graph = build_graph(config)
    assert graph.observation_space.shape == (7, 7, 20)  # 11 objects + 6 colours + 3 states, one-hot


def test_log_std_init_sets_the_gaussian_width():
    from srl.graph import make_policy

    for log_std_init in (0.0, -2.0):  # hopper-ppo's, and the zoo's MuJoCo setting
        config = load_config("hopper-ppo", [f"policy_kwargs.log_std_init={log_std_init}"])
        graph = build_graph(config)
        policy = make_policy(config, graph.observation_space, graph.action_space)
        assert policy.log_std is not None and np.allclose(policy.log_std.detach().numpy(), log_std_init)


@pytest.mark.parametrize("activation, nonlinearity", [("tanh", np.tanh), ("relu", lambda x: np.maximum(x, 0.0))])
def test_the_mlp_activation_is_the_hidden_layers_nonlinearity(activation, nonlinearity):
    import gymnasium as gym
    import torch

    from srl.models.mlp import ActorCriticMLP

    policy = ActorCriticMLP(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Box(-1, 1, (2,)), (5, 4), activation=activation)
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    x = obs
    for weight, bias in zip(policy.hidden_weight, policy.hidden_bias):  # the critic's stack: index 1
        x = nonlinearity(x @ weight[1].detach().numpy() + bias[1].detach().numpy())
    expected = x @ policy.critic_head.weight.detach().numpy().T + policy.critic_head.bias.detach().numpy()
    with torch.no_grad():
        assert np.allclose(policy.value(torch.from_numpy(obs)).numpy(), expected[:, 0], atol=1e-5)
        assert np.allclose(policy.rollout(torch.from_numpy(obs))["value"].numpy(), expected[:, 0], atol=1e-5)


def test_an_unknown_activation_names_the_allowed_ones():
    from srl.config import ConfigError

    config = load_config("hopper-ppo", ["policy_kwargs.activation=gelu"])
    with pytest.raises(ConfigError, match=r"field 'policy_kwargs': policy_kwargs.activation must be one of \['relu', 'tanh'\], got 'gelu'"):
        build_graph(config)  # before any process starts


def test_lunarlander_ppo_tiny_run_writes_metrics(run_dir):
    from srl.launch.run import run_experiment

    overrides = ["run.seed=1", "stop.total_env_steps=2048", "dataflow.envs_per_actor=4", "dataflow.sample_length=128", "algo.num_minibatches=8",
                 f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false"]
    config = load_config("lunarlander-ppo", overrides)
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["env_steps"] >= 2048 and summary["updates"] >= 1, summary
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any("losses/policy_loss" in r and np.isfinite(r["losses/policy_loss"]) for r in rows), rows[-1]


def test_the_benchmark_knows_each_tuned_env_on_both_sides():
    srl_side = {b.experiment: env for env, b in tuned_vs_sb3.BENCHES.items()}
    assert srl_side == EXPERIMENTS
    for env, bench in tuned_vs_sb3.BENCHES.items():
        algo, n_envs, _, kwargs, _ = _sb3_tuned.zoo_settings(env)
        assert algo == bench.zoo_algorithm and n_envs >= 1 and kwargs
        assert bench.target == load_config(bench.experiment, []).stop.target_return


def test_sb3_schedules_and_classes_resolve():
    resolved = _sb3_tuned._resolve({"learning_rate": "lin:7.3e-4", "policy_kwargs": {"activation_fn": "nn:ReLU"}})
    assert resolved["learning_rate"](1.0) == pytest.approx(7.3e-4) and resolved["learning_rate"](0.5) == pytest.approx(3.65e-4)
    import torch

    assert resolved["policy_kwargs"]["activation_fn"] is torch.nn.ReLU


def test_a_killed_sb3_run_is_read_from_its_last_progress_line():
    text = "steps=20000 episodes=31 return_mean=-150.20 t=40.1s\nsteps=40000 episodes=70 return_mean=-80.50 t=80.3s\n"
    assert tuned_vs_sb3._progress_of(text) == {"total_env_steps": 40000, "final_return_mean": -80.5}
    assert tuned_vs_sb3._progress_of("Traceback ...\n") == {}


def test_median_counts_a_run_that_missed_as_slowest():
    runs = [{"reached": True, "time_s": 10.0}, {"reached": False, "time_s": None}, {"reached": True, "time_s": 30.0}]
    assert tuned_vs_sb3._median_time(runs) == 30.0
    assert tuned_vs_sb3._median_time(runs[1:2]) is None
