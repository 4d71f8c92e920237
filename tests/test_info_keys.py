"""Info keys as metrics (issue 37, item 4): `monitor.info_keys` (is_success by default) logs the
mean of each key's value at episodes' ends: from the env's info through the actor's reports,
checked as reports are, to metrics.jsonl, TensorBoard, summary.json and the progress line."""

from __future__ import annotations

import json
import math

import goal_env  # noqa: F401  (registers srl-tests/PointGoal-v0)
import gymnasium as gym
import numpy as np
import pytest

from srl.api.env import Environment, EnvStep
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.envs import GymVectorEnv, SerialVectorEnv
from srl.launch.monitor import RunMonitor
from srl.launch.reports import payload_problem
from srl.monitor.episodes import WINDOW
from srl.monitor.progress import Estimate, Limits, progress_line
from srl.streams.control import Kind, Role
from srl.workers.actor import ActorKernel


class Counter(gym.Env):
    """Episodes of `length` steps; info holds the step number, `hits` (True at odd episodes' ends)
    and a non-number."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 3) -> None:
        self.length, self.episode = length, -1

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.episode = 0, self.episode + 1
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        info = {"step": self.t, "hits": np.bool_(done and self.episode % 2 == 1), "name": "text"}
        return np.zeros(1, np.float32), 1.0, done, False, info


def test_the_gym_loop_backend_writes_each_key_at_episode_ends():
    env = GymVectorEnv([Counter(3), Counter(2)])
    env.watch_info(("step", "hits", "name", "absent"))
    env.reset(seed=0)
    seen = []
    for _ in range(6):
        env.step(np.zeros(2, np.int64))
        values = env.ended_info.values
        seen.append((values["step"].tolist(), values["hits"].tolist()))
        assert np.isnan(values["name"]).all() and np.isnan(values["absent"]).all()  # no number, no key
    nan = math.nan
    assert str(seen[:4]) == str([([nan, nan], [nan, nan]), ([nan, 2.0], [nan, 0.0]), ([3.0, nan], [0.0, nan]),
                                 ([nan, 2.0], [nan, 1.0])])


def test_srl_environments_report_each_agents_info():
    class Two(Environment):
        agents = ("a", "b")
        observation_spaces = {a: gym.spaces.Box(-1, 1, (1,), np.float32) for a in agents}
        action_spaces = {a: gym.spaces.Discrete(2) for a in agents}

        def reset(self, seed=None):
            return {a: np.zeros(1, np.float32) for a in self.agents}

        def step(self, actions):
            zero = {a: np.zeros(1, np.float32) for a in self.agents}
            return EnvStep(zero, {a: 0.0 for a in self.agents}, {a: True for a in self.agents},
                           {a: False for a in self.agents}, {"a": {"score": 1}, "b": {"score": 0.5}})

    env = SerialVectorEnv([Two()])
    env.watch_info(("score",))
    env.reset(seed=0)
    env.step(np.zeros(2, np.int64))
    assert env.ended_info.values["score"].tolist() == [1.0, 0.5]


def test_the_actor_reports_the_values_of_the_episodes_it_counts():
    env = GymVectorEnv([Counter(2)])
    actor = ActorKernel.__new__(ActorKernel)  # only its episode counting: no streams
    actor.envs, actor.info_keys, actor.finished_info = [env], ("hits",), {}
    env.watch_info(("hits",))
    from srl.monitor.episodes import EpisodeTally

    actor.tallies, actor.finished_returns, actor.finished_lengths = [EpisodeTally(1)], [], []
    env.reset(seed=0)
    for _ in range(2 * (WINDOW + 10)):
        out = env.step(np.zeros(1, np.int64))
        actor._count_episodes(0, out.reward, out.terminated | out.truncated)
    assert len(actor.finished_info["hits"]) == WINDOW  # the last WINDOW, as the returns
    assert actor.finished_info["hits"][-2:] == [0.0, 1.0]


def test_reports_with_info_are_checked_as_returns_are():
    base = {"env_steps": 10, "episode_returns": [1.0], "episode_lengths": [3], "episodes": 1}
    assert payload_problem(Kind.REPORT, Role.ACTOR, {**base, "episode_info": {"is_success": [1.0, 0.0]}}) is None
    for bad in ({"is_success": ["yes"]}, {"a b": [1.0]}, {"k": [0.0] * (WINDOW + 1)}, [1.0],
                {f"k{i}": [] for i in range(17)}):
        assert payload_problem(Kind.REPORT, Role.ACTOR, {**base, "episode_info": bad}), bad


def test_the_monitor_means_each_key_over_the_last_episodes():
    monitor = RunMonitor(build_config({}))
    report = {"env_steps": 10, "episode_returns": [1.0], "episode_lengths": [3], "episodes": 1}
    monitor.on_report(Role.ACTOR, 0, {**report, "episode_info": {"is_success": [1.0, 0.0, 1.0, 1.0]}})
    monitor.on_report(Role.ACTOR, 1, {**report, "episode_info": {"is_success": [0.0] * WINDOW, "crashed": [1.0]}})
    monitor.on_report(Role.ACTOR, 0, report)  # a report without (a vector backend's)
    metrics = monitor.metrics()
    assert metrics["info/is_success"] == 0.0 and metrics["info/crashed"] == 1.0  # the last WINDOW: all zeros
    line = progress_line("x", metrics, Estimate(None, None, None, None), Limits(), 1.0)
    assert "return 1.00, crashed 1.00, is_success 0.00," in line


def test_info_keys_are_validated_with_the_field_named():
    assert build_config({}).monitor.info_keys == ["is_success", "success"]  # goal envs' success rate by default
    assert build_config({"monitor": {"info_keys": "is_success,crashed"}}).monitor.info_keys == ["is_success", "crashed"]
    for bad in (["a/b"], ["is_success", "is_success"], [f"k{i}" for i in range(17)], [""]):
        with pytest.raises(ConfigError, match="field 'monitor.info_keys'"):
            build_config({"monitor": {"info_keys": bad}})


def test_a_goal_envs_success_rate_reaches_summary_metrics_and_tensorboard(run_dir, capsys):
    config = build_config({
        "modules": ["goal_env"], "env": "srl-tests/PointGoal-v0", "algorithm": "ppo", "launch": {"launcher": "inline"},
        "stop": {"total_env_steps": 2048}, "run": {"run_dir": str(run_dir), "seed": 0},
        "dataflow": {"envs_per_actor": 8, "sample_length": 64},
        "monitor": {"display": "plain", "progress_interval_s": 0.1, "info_keys": ["is_success", "step_count"]},
    })
    from srl.launch.run import run_experiment

    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    rate = summary["info"]["info/is_success"]
    assert 0.0 <= rate <= 1.0 and "info/step_count" not in summary["info"]  # a key the env never reports
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["info/is_success"] == rate
    assert ", is_success " in capsys.readouterr().out
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tb"))
    events.Reload()
    assert any("is_success" in tag for tag in events.Tags()["scalars"]), events.Tags()
