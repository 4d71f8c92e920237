"""Pong at the env limit (issue 35): env_backend=auto steps Atari ids with EnvPool where it is
installed, with the preprocessing of srl.envs.atari and the actor's share of the cores as threads;
launch.layout=machine sizes the actors from the machine (a pure function, by hand at 2, 16 and 64
cores); actors run at launch.actor_niceness."""

from __future__ import annotations

import multiprocessing as mp
import os

import gymnasium as gym
import numpy as np
import pytest

from srl import devices
from srl.config.load import load_config
from srl.envs import make_vector_env, native_backends
from srl.envs.native_backends import backend_choice
from srl.graph import build, machine
from srl.graph.sizing import ActorSizing, choice_lines, env_threads, machine_layout
from srl.launch.shell import lower_priority
from srl.streams.control import Role

PONG = "ALE/Pong-v5"


def test_auto_steps_atari_with_envpool_where_installed_else_the_loop(monkeypatch):
    pong = load_config("pong-ppo", [])
    assert backend_choice(PONG, pong.env_kwargs, "auto") == ("envpool", "auto: an Atari id and EnvPool installed")
    assert backend_choice(PONG, {}, "loop")[0] == "loop"  # as set
    assert backend_choice("CartPole-v1", {}, "auto")[0] == "vector"
    assert backend_choice("Acrobot-v1", {}, "auto")[0] == "loop"
    chosen, why = backend_choice(PONG, {"max_num_frames_per_episode": 1000}, "auto")  # no EnvPool twin
    assert chosen == "loop" and "max_num_frames_per_episode" in why
    assert "env_backend: envpool (auto: an Atari id" in choice_lines(pong)[0]  # what srl run and srl show print
    monkeypatch.setattr(native_backends, "envpool_installed", lambda: False)
    chosen, why = backend_choice(PONG, pong.env_kwargs, "auto")
    assert chosen == "loop" and "pip install 'srl[envpool]'" in why
    venv = make_vector_env(PONG, pong.env_kwargs, 1, backend="auto")
    assert type(venv).__name__ == "GymVectorEnv"  # the loop backend's
    venv.close()


def _preprocessing(env: gym.Env) -> gym.wrappers.AtariPreprocessing:
    while not isinstance(env, gym.wrappers.AtariPreprocessing):
        env = env.env
    return env


@pytest.mark.parametrize("sticky", [None, 0.0])  # the v5 default (0.25), and pong-ppo's
def test_envpool_pong_has_the_loop_backends_spaces_and_preprocessing(sticky):
    """Same spaces, frames, skip, no-ops, sticky actions, no life loss, no reward clipping; the
    reset dynamics differ (EnvPool's own generator draws no-ops and sticky actions: docs/envs.md)."""
    kwargs = {"frame_stack": 4, **({} if sticky is None else {"repeat_action_probability": sticky})}
    pool = make_vector_env(PONG, kwargs, 2, backend="auto")
    loop = make_vector_env(PONG, kwargs, 1, backend="loop")
    try:
        assert type(pool).__name__ == "NativeVectorEnv" and type(loop).__name__ != "NativeVectorEnv"
        assert pool.observation_space == loop.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        assert pool.action_space == loop.action_space == gym.spaces.Discrete(6)
        one = loop.envs[0]
        pre = _preprocessing(one)
        settings = pool.backend.kwargs
        assert (settings["stack_num"], settings["frame_skip"], settings["noop_max"]) == (4, pre.frame_skip, pre.noop_max)
        assert (settings["img_height"], settings["img_width"]) == pre.screen_size == (84, 84)
        assert settings["gray_scale"] is pre.grayscale_obs is True
        assert settings["repeat_action_probability"] == one.unwrapped.ale.getFloat("repeat_action_probability")
        assert settings["repeat_action_probability"] == (0.25 if sticky is None else sticky)
        assert settings["episodic_life"] is pre.terminal_on_life_loss is False
        assert settings["reward_clip"] is False and settings["use_fire_reset"] is False
        obs = pool.reset(seed=1)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        assert loop.reset(seed=1).shape == (1, 4, 84, 84)
    finally:
        pool.close()
        loop.close()


def test_an_actors_envpool_threads_are_its_share_of_the_cores(monkeypatch):
    monkeypatch.setattr(build, "cpu_count", lambda: 16)
    two = load_config("pong-ppo", ["launch.num_actor_workers=2", "dataflow.envs_per_actor=32"])
    assert build.actor_env_kwargs(two) == {**two.env_kwargs, "num_threads": 8}
    few = load_config("pong-ppo", ["launch.num_actor_workers=2", "dataflow.envs_per_actor=4"])
    assert build.actor_env_kwargs(few)["num_threads"] == 4  # at most one per env
    given = load_config("pong-ppo", ["env_kwargs.num_threads=3"])
    assert build.actor_env_kwargs(given)["num_threads"] == 3
    loop = load_config("pong-ppo", ["env_backend=loop"])
    assert "num_threads" not in build.actor_env_kwargs(loop)
    assert env_threads(cores=2, num_actor_workers=4, envs=16) == 1


def test_machine_layout_by_hand():
    # 2 cores: nothing to spare, one actor
    assert machine_layout(2, gpu=False, env_kind="loop") == ActorSizing(1, 16, 1, 0)
    assert machine_layout(2, gpu=True, env_kind="batched") == ActorSizing(1, 32, 1, 0)
    # 16 cores: controller + parameter service, trainer, policy worker (GPU) keep 3; 13 for actors
    assert machine_layout(16, gpu=True, env_kind="batched") == ActorSizing(6, 32, 2, 5)
    assert machine_layout(16, gpu=True, env_kind="loop") == ActorSizing(13, 16, 1, 5)
    assert machine_layout(16, gpu=False, env_kind="batched") == ActorSizing(7, 32, 2, 5)  # 14 // 2
    # 64 cores
    assert machine_layout(64, gpu=True, env_kind="batched") == ActorSizing(30, 32, 2, 5)
    assert machine_layout(4, gpu=False, env_kind="batched") == ActorSizing(1, 32, 2, 0)
    assert machine_layout(64, gpu=False, env_kind="loop") == ActorSizing(62, 16, 1, 5)


def _machine(monkeypatch, cores: int, gpus: int) -> None:
    monkeypatch.setattr(machine, "cpu_count", lambda: cores)
    monkeypatch.setattr(devices, "cpu_count", lambda: cores)
    monkeypatch.setattr(devices, "cuda_count", lambda: gpus)


def test_layout_machine_sets_what_the_config_leaves_unset(monkeypatch):
    _machine(monkeypatch, 16, gpus=1)
    config = load_config("pong-ppo", ["launch.layout=machine", "devices.trainer=cuda", "devices.policy=cuda",
                                      "dataflow.inference=policy_worker"])
    # pong-ppo sets envs_per_actor=8 (the PPO paper's 8 envs): kept
    assert (config.launch.num_actor_workers, config.dataflow.envs_per_actor, config.launch.actor_niceness) == (6, 8, 5)
    assert "layout: launch.num_actor_workers=6" in choice_lines(config)[1]
    config = load_config("cartpole-ppo", ["launch.layout=machine", "launch.num_trainers=4", "launch.num_actor_workers=4",
                                          "devices.trainer=cpu"])
    assert config.launch.num_actor_workers == 4  # set: kept
    config = load_config("cartpole-ppo", ["launch.layout=machine", "launch.num_trainers=4", "devices.trainer=cpu"])
    assert (config.launch.num_actor_workers, config.dataflow.envs_per_actor) == (8, 32)  # vector: 13 // 2 = 6, up to 4 | 8
    config = load_config("cartpole-ppo", ["launch.layout=machine", "env_backend=loop", "launch.actor_niceness=2",
                                          "launch.num_actor_workers=5"])
    assert (config.launch.num_actor_workers, config.dataflow.envs_per_actor, config.launch.actor_niceness) == (5, 16, 2)
    _machine(monkeypatch, 64, gpus=0)
    config = load_config("cartpole-ppo", ["launch.layout=machine", "env_backend=loop"])
    assert (config.launch.num_actor_workers, config.dataflow.envs_per_actor) == (62, 16)
    given = load_config("cartpole-ppo", [])  # launch.layout=given: today's defaults
    assert (given.launch.num_actor_workers, given.dataflow.envs_per_actor, given.launch.actor_niceness) == (1, 16, 0)
    inline = load_config("cartpole-ppo", ["launch.layout=machine", "launch.launcher=inline"])
    assert inline.launch.num_actor_workers == 1


def _niceness_after(role: Role, niceness: int, out: mp.Queue) -> None:
    config = load_config("cartpole-ppo", [f"launch.actor_niceness={niceness}"])

    class Graph:
        pass

    class Spec:
        pass

    graph, spec = Graph(), Spec()
    graph.config, spec.role = config, role  # type: ignore[attr-defined]
    before = os.getpriority(os.PRIO_PROCESS, 0)
    lower_priority(graph, spec)
    out.put(os.getpriority(os.PRIO_PROCESS, 0) - before)


@pytest.mark.parametrize("role,niceness,added", [(Role.ACTOR, 7, 7), (Role.ACTOR, 0, 0), (Role.TRAINER, 7, 0),
                                                 (Role.POLICY, 7, 0)])
def test_actors_and_only_actors_run_at_the_configured_niceness(role, niceness, added):
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_niceness_after, args=(role, niceness, out))
    child.start()
    got = out.get(timeout=60)
    child.join(timeout=30)
    assert child.exitcode == 0 and got == added
