"""Envs from pip packages as they come (issue 37, item 7): `module:EnvId` (highway-env),
`modules=module:function` for a package that registers its ids on a call (MinAtar), a goal env of
gymnasium-robotics trained by `algorithm=sac` alone on its Dict observation, `base:` naming
another experiment file, one console warning when PPO's updates run away, and envs of the old gym
API through Shimmy. The packages are in the [test] extra (highway-env, MinAtar, gymnasium-robotics,
shimmy and gym)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srl.config import ConfigError
from srl.config.checks import build_config
from srl.config.load import load_config
from srl.graph import build_graph
from srl.launch.run import run_experiment

SHORT = {"launch": {"launcher": "inline"}, "monitor": {"display": "off"}}


DOCS = Path(__file__).parent.parent / "docs" / "envs.md"


def _documented_runs() -> list[list[str]]:
    """The `srl run EXPERIMENT key=value ...` lines of docs/envs.md, each as [experiment, overrides...]."""
    return [line.split()[2:] for line in DOCS.read_text().splitlines() if line.strip().startswith("srl run ")]


def test_module_colon_env_id_imports_the_package_that_registers_it(run_dir):
    """highway-env registers highway-fast-v0 when imported: the documented `highway_env:highway-fast-v0`
    needs no modules=."""
    runs = [r for r in _documented_runs() if "env=highway_env:highway-fast-v0" in r]
    assert runs, "docs/envs.md documents module:EnvId with highway-env"
    experiment, *overrides = runs[0]
    config = load_config(experiment, [*overrides, f"run.run_dir={run_dir}", "stop.total_env_steps=32",
                                      "launch.launcher=inline", "monitor.display=off", "dataflow.envs_per_actor=2",
                                      "dataflow.sample_length=16"])
    assert run_experiment(config) == 0
    assert json.loads((run_dir / "summary.json").read_text())["env_steps"] >= 32


def test_every_documented_recipe_builds():
    """Each `srl run` line of docs/envs.md loads and builds its graph (Shimmy's names a package of
    one's own: it runs in test_an_old_gym_env_learns_through_the_documented_shimmy_recipe)."""
    runs = _documented_runs()
    shimmy = [r for r in runs if "modules=shimmy,my_old_package" in r]
    assert shimmy and "env=GymV21Environment-v0" in shimmy[0]  # the old-gym recipe is there
    others = [r for r in runs if r not in shimmy]
    assert len(others) >= 3
    for experiment, *overrides in others:
        build_graph(load_config(experiment, overrides))


@pytest.mark.parametrize("shimmy_id, old_id", [("GymV21Environment-v0", "OldCorridor21-v0"),
                                               ("GymV26Environment-v0", "OldCorridor26-v0")])
def test_an_old_gym_env_learns_through_the_documented_shimmy_recipe(run_dir, shimmy_id, old_id):
    """docs/envs.md's Shimmy line, its package being tests/old_gym_env.py (a corridor written for gym
    0.21 or 0.26, registered with gym): PPO learns to walk right (0.96; a random walk scores far
    less). Before, gym 0.26.2's env checker failed every step on NumPy 2 (np.bool8)."""
    runs = [r for r in _documented_runs() if "modules=shimmy,my_old_package" in r]
    experiment, *overrides = runs[0]
    ours = {"my_old_package": "old_gym_env", "GymV21Environment-v0": shimmy_id, "MyOldEnv-v0": old_id}
    for theirs, mine in ours.items():
        overrides = [o.replace(theirs, mine) for o in overrides]
    config = load_config(experiment, [*overrides, f"run.run_dir={run_dir}", "stop.total_env_steps=8192",
                                      "stop.target_return=null", "run.seed=1", "launch.launcher=inline",
                                      "monitor.display=off"])
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= 8192
    assert summary["episode_return_mean"] > 0.9, summary


def test_an_old_gym_env_handed_to_gymnasium_directly_is_told_to_use_shimmy():
    """An old-API env registered with Gymnasium itself: a reset without a seed is refused before
    launch, a 4-value step when it comes, both naming the Shimmy recipe (before: "reset() got an
    unexpected keyword argument 'seed'" or "not enough values to unpack" from a worker)."""
    import numpy as np
    import old_gym_env  # noqa: F401  (registers the ids)

    from srl.envs import gymnasium_env, make_vector_env

    with pytest.raises(ConfigError, match="field 'env'.*'GymnasiumOldReset-v0': reset\\(\\) takes no seed.*Shimmy"):
        build_graph(build_config({"env": "GymnasiumOldReset-v0"}))
    old_step = "'GymnasiumOldStep-v0': step\\(\\) returned 4 values.*modules=shimmy env=GymV21Environment-v0"
    venv = make_vector_env("GymnasiumOldStep-v0", {}, num_envs=2)
    try:
        venv.reset(seed=0)
        with pytest.raises(ValueError, match=old_step):
            venv.step(np.ones(2, dtype=np.int64))
    finally:
        venv.close()
    env = gymnasium_env("GymnasiumOldStep-v0")  # one env, as srl eval plays it
    try:
        env.reset(seed=0)
        with pytest.raises(ValueError, match=old_step):
            env.step({"agent": 1})
    finally:
        env.close()


def test_modules_can_call_the_function_that_registers_a_packages_ids(monkeypatch):
    """MinAtar's gymnasium ids exist only after minatar.gym.register_envs() is called. Another test
    in this process may have called it already (tests/minatar_env.py does on import): the registry
    and srl's record of calls are given back as they were before any."""
    import gymnasium as gym

    import srl.config.schema

    registry = {k: v for k, v in gym.envs.registry.items() if not k.startswith("MinAtar/")}
    monkeypatch.setattr(gym.envs.registration, "registry", registry)
    monkeypatch.setattr(gym.envs, "registry", registry)
    monkeypatch.setattr(srl.config.schema, "_CALLED", set())
    with pytest.raises(ConfigError, match="unknown environment 'MinAtar/Breakout-v1'|MinAtar/Breakout-v1"):
        build_graph(build_config({"env": "MinAtar/Breakout-v1"}))
    config = build_config({"env": "MinAtar/Breakout-v1", "modules": "minatar.gym:register_envs"})
    graph = build_graph(config)
    assert graph.observation_space.shape == (10, 10, 4)
    build_config({"env": "MinAtar/Breakout-v1", "modules": ["minatar.gym:register_envs"]})  # called once per process
    with pytest.raises(ConfigError, match="field 'modules': 'minatar.gym:no_such'.*register_envs"):
        build_config({"modules": ["minatar.gym:no_such"]})


def test_sac_alone_trains_on_a_gymnasium_robotics_goal_env(run_dir):
    """PointMaze's Dict observation (observation, achieved_goal, desired_goal), no wrapper, no
    policy and no replay given: SAC brings its own, and the success rate is logged."""
    config = build_config({
        **SHORT, "modules": ["gymnasium_robotics"], "env": "PointMaze_UMaze-v3", "algorithm": "sac",
        "run": {"run_dir": str(run_dir)}, "stop": {"total_env_steps": 600}, "replay": {"warmup": 200, "batch_size": 32},
        "dataflow": {"envs_per_actor": 2, "sample_length": 16}, "env_kwargs": {"max_episode_steps": 50},
    })
    assert config.policy == "squashed-gaussian-mlp" and config.replay is not None and config.replay.replay_ratio == 32.0
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] > 0 and summary["episodes"] > 0, summary
    assert 0.0 <= summary["info"]["info/success"] <= 1.0, summary["info"]  # PointMaze's key (Fetch's: is_success)


def test_base_names_another_experiment_file(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "common.yaml").write_text("base: cartpole-ppo\nalgo: {lr: 2.0e-4}\nrun: {seed: 7}\n")
    (tmp_path / "mine.yaml").write_text("base: shared/common.yaml\nalgo: {epochs: 3}\n")
    config = load_config(str(tmp_path / "mine.yaml"))
    assert (config.algo_config.lr, config.algo_config.epochs, config.run.seed) == (2e-4, 3, 7)
    assert config.experiment == "mine" and config.env == "CartPole-v1"  # cartpole-ppo's, through the chain
    (tmp_path / "loop_a.yaml").write_text("base: loop_b.yaml\n")
    (tmp_path / "loop_b.yaml").write_text("base: loop_a.yaml\n")
    with pytest.raises(ConfigError, match="base: 'loop_a.yaml' leads back to a file already read"):
        load_config(str(tmp_path / "loop_a.yaml"))
    (tmp_path / "orphan.yaml").write_text("base: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="base: no experiment file .*nowhere.yaml"):
        load_config(str(tmp_path / "orphan.yaml"))


def test_ppo_warns_once_when_its_updates_run_away(run_dir, capfd):
    config = build_config({**SHORT, "env": "CartPole-v1", "run": {"run_dir": str(run_dir), "seed": 0},
                           "stop": {"total_env_steps": 4096}, "algo": {"lr": 0.05, "epochs": 10, "anneal_lr": False}})
    assert run_experiment(config) == 0
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "clipfrac" in line and "warning" in line]
    assert len(warnings) == 1, err
    assert "lower algo.lr (now 0.05) or algo.epochs (now 10), or raise algo.num_minibatches (now 1)" in warnings[0]
