"""Evaluator worker: deterministic rounds with one parameter version, reported as eval/* metrics."""

import json

import pytest
import torch

from srl.config import ConfigError
from srl.config.load import load_config
from srl.envs import make_vector_env
from srl.graph import build_graph
from srl.launch.run import run_experiment
from srl.models import ActorCriticMLP
from srl.workers.evaluator import EvaluatorKernel, Player


class FakeParams:
    """A parameter subscriber whose versions the test sets; `poll` loads nothing."""

    def __init__(self):
        self.version, self.polls, self.receivers = -1, 0, []

    def poll(self, module):
        self.polls += 1
        return False


def make_kernel(episodes=2, interval_s=0.0):
    torch.manual_seed(0)
    env = make_vector_env("counting", {"episode_length": 5}, num_envs=1)
    policy = ActorCriticMLP(env.observation_space, env.action_space)
    return EvaluatorKernel([Player(policy, FakeParams())], env, seed=0, episodes=episodes, interval_s=interval_s)


def test_rounds_wait_for_parameters_and_report_whole_rounds():
    kernel = make_kernel(episodes=2)
    kernel.start()
    assert not kernel.poll() and kernel.report()["eval_episode_returns"] == []  # no parameters yet
    kernel.players[0].params.version = 4
    assert kernel.poll()  # a round starts with version 4 and plays up to 64 steps
    kernel.players[0].params.version = 5  # a newer version mid-round is not used until the next round
    while kernel.round_returns is not None:
        kernel.poll()
    report = kernel.report()
    assert len(report["eval_episode_returns"]) == 2 and report["eval_policy_version"] == 4
    assert kernel.report()["eval_episode_returns"] == []  # each round reported once
    kernel.poll()
    assert kernel.round_versions == [5]
    kernel.close()


def test_interval_between_rounds():
    kernel = make_kernel(episodes=1, interval_s=3600.0)
    kernel.start()
    kernel.players[0].params.version = 0
    while not kernel.report()["eval_episode_returns"]:
        kernel.poll()
    polls = kernel.players[0].params.polls
    assert not kernel.poll() and kernel.round_returns is None  # idle: the next round is an hour away
    assert kernel.players[0].params.polls == polls + 1  # but still draining the parameter stream
    kernel.close()


def test_pod_rejects_an_evaluator():
    with pytest.raises(ConfigError, match="eval.episodes"):
        build_graph(load_config("cartpole-pod", ["eval.episodes=2"]))


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_eval_metrics_in_a_run(launcher, run_dir):
    overrides = [f"launch.launcher={launcher}", "eval.episodes=2", "eval.interval_s=0.2", "stop.total_env_steps=15000",
                 "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off"]
    graph = build_graph(load_config("cartpole-ppo", overrides))
    assert "eval:0" in [w.name for w in graph.workers]
    assert "eval:0" in next(s for s in graph.streams if s.name == "params.out").consumers
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [m for m in lines if m.get("eval/episode_return_mean") is not None]
    assert evals, "an evaluation round finished and was reported"
    assert all(m["eval/episode_return_mean"] >= 8 for m in evals)  # CartPole lasts >= 8 steps
    assert evals[-1]["eval/policy_version"] >= 0


def test_display_never_shows_eval_return_as_the_training_return():
    from srl.monitor.display import _lookup

    metrics = {"episode_return_mean": None, "eval/episode_return_mean": 500.0}
    assert _lookup(metrics, ("episode_return_mean",)) is None
    assert _lookup({"charts/episode_return_mean": 3.0}, ("episode_return_mean",)) == 3.0


def test_a_run_stops_on_the_evaluators_return_with_target_on_eval(run_dir):
    # every CartPole episode lasts >= 8 steps: the first finished round reaches the target, long
    # before the budget, and the stop names the evaluator (not the training episodes' window)
    overrides = ["launch.launcher=local", "eval.episodes=3", "eval.interval_s=0.2", "stop.total_env_steps=1000000",
                 "stop.target_return=8", "stop.target_on=eval", f"run.run_dir={run_dir}", "monitor.display=off"]
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return 8.0 reached by the evaluator"), summary["stop_reason"]
    assert "3 deterministic episodes" in summary["stop_reason"]
    assert summary["env_steps"] < 1_000_000


@pytest.mark.parametrize("overrides, needs", [
    (["stop.target_on=eval"], "eval.episodes"),
    (["stop.target_on=eval", "eval.episodes=2", "run.deterministic=true"], "stop.target_on=training"),
    (["stop.target_on=best"], "'training' or 'eval'"),
])
def test_target_on_eval_is_refused_without_an_evaluator_or_in_lock_step(overrides, needs):
    with pytest.raises(ConfigError, match="stop.target_on") as refused:
        load_config("cartpole-ppo", overrides)
    assert needs in str(refused.value)
