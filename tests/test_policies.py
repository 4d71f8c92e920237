"""Several policies in one run (config `policies` + `policy_mapping`, srl.graph.lanes): bad mappings are
refused before anything starts; each agent's rows reach its own policy's trainer, every transition
once, on every launcher and transport; each policy has its own metrics, checkpoints and summary;
deterministic runs stay bit-identical; mpe-tag's trained predators and prey beat random ones."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import recording  # noqa: F401  (registers the "record" algorithm)
from test_faults import kill_now

from srl.api import Worker, register_worker
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.graph import build_graph
from srl.launch.run import run_experiment
from srl.testing import check_counts

EPISODE_LENGTH = 7
TAG = {"module": "mpe2.simple_tag_v3", "max_cycles": 25, "continuous_actions": False}


def tag_config(**values):
    return build_config({"env": "pettingzoo", "env_kwargs": TAG, **values})


@pytest.mark.parametrize("values, message", [
    ({"policies": {"predator": {}}, "policy_mapping": {"adversary_*": "predator"}},
     r"agent 'agent_0' of env 'pettingzoo' matches no entry \(\['adversary_\*'\]\)"),
    ({"policies": {"predator": {}, "prey": {}, "ghost": {}},
      "policy_mapping": {"adversary_*": "predator", "agent_*": "prey"}}, r"\['ghost'\] act for no agent"),
    ({"policies": {"all": {}}, "policy_mapping": {"*": "all"}},
     r"policy 'all' acts for agents 'adversary_0' \(observation Box\(-inf, inf, \(16,\), float32\).*"
     r"and 'agent_0' \(observation Box\(-inf, inf, \(14,\), float32\).*map them to different policies"),
    ({"policies": {"predator": {}}, "policy_mapping": {"adversary_*": "predator", "agent_*": "prey"}},
     r"field 'policy_mapping': \{'agent_\*': 'prey'\} name no policy; policies: \['predator'\]"),
    ({"policies": {"predator": {}}}, r"field 'policy_mapping': policies needs it"),
    ({"policies": {"predator": {"algo": {"lrr": 1}}, "prey": {}},
      "policy_mapping": {"adversary_*": "predator", "agent_*": "prey"}}, r"unknown field 'policies.predator.algo.lrr'; allowed fields: lr, "),
    ({"policies": {"predator": {"policy": "no-such-net"}, "prey": {}},
      "policy_mapping": {"adversary_*": "predator", "agent_*": "prey"}}, r"field 'policies.predator.policy'"),
    ({}, r"observe spaces of different sizes.*give each kind its own \(policies and policy_mapping\)"),
], ids=["agent-without-policy", "unused-policy", "spaces-differ", "unknown-policy", "no-mapping", "bad-algo",
        "unknown-net", "one-policy-for-unlike-agents"])  # fmt: skip
def test_a_bad_mapping_is_one_clear_error_before_anything_starts(values, message):
    with pytest.raises(ConfigError, match=message):
        build_graph(tag_config(**values))


def test_srl_run_refuses_a_bad_mapping_without_starting_a_worker(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "run", "mpe-tag", "policy_mapping=!{'adversary_*': predator}",
                           f"run.run_dir={run_dir}"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "agent 'agent_0' of env 'pettingzoo' matches no entry" in proc.stderr and "Traceback" not in proc.stderr
    assert not (run_dir / "summary.json").exists()


def counting_lanes(launcher: str, run_dir: Path, **flow) -> object:
    """Three counting agents: agent_1 is policy b's, agent_0 and agent_2 policy a's (the first entry
    that matches wins); each policy records its batches in a directory of its own."""
    return build_config({
        "env": "counting", "env_kwargs": {"episode_length": EPISODE_LENGTH, "num_agents": 3},
        "algorithm": "record", "algo": {"out_dir": str(run_dir / "unused")},
        "policies": {"a": {"algo": {"out_dir": str(run_dir / "a")}}, "b": {"algo": {"out_dir": str(run_dir / "b")}}},
        "policy_mapping": {"agent_1": "b", "agent_*": "a"},
        "launch": {"launcher": launcher, "num_actor_workers": 2},
        "dataflow": {"envs_per_actor": 4, "ring_splits": 2, "sample_length": 5, "batch_segments": 3,
                     "max_policy_lag": 10**6, **flow},
        "stop": {"total_env_steps": 3000}, "run": {"run_dir": str(run_dir)}, "monitor": {"display": "off"},
        "eval": {"episodes": 2, "interval_s": 0.1},
    })  # fmt: skip


@pytest.mark.parametrize("launcher, flow", [
    ("inline", {}), ("local", {}), ("local", {"inference": "policy_worker"}), ("local", {"transport": "tcp"}),
    ("local", {"transport": "tcp", "inference": "policy_worker"}),
], ids=["inline", "local", "policy-workers", "tcp", "tcp-policy-workers"])  # fmt: skip
def test_each_policy_trains_on_its_own_agents_rows_every_transition_once(launcher, flow, run_dir):
    from recording import load_batches

    assert run_experiment(counting_lanes(launcher, run_dir, **flow)) == 0
    for policy, agents in (("a", {0.0, 2.0}), ("b", {1.0})):
        batches = load_batches(run_dir / policy)
        assert batches, f"policy {policy}'s trainer got no batch"
        obs = [b["obs"] for b in batches]
        assert set(np.unique(np.concatenate([o[..., 3].ravel() for o in obs]))) == agents, policy
        totals = check_counts(obs, [b["terminated"] for b in batches], EPISODE_LENGTH)
        assert totals["envs"] == 2 * 4 and totals["transitions"] >= 1000 * len(agents), (policy, totals)
        assert (run_dir / "policies" / policy / "checkpoints" / "latest.json").is_file()
    assert not (run_dir / "unused").exists()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and set(summary["policies"]) == {"a", "b"}
    for policy in ("a", "b"):  # every counting episode returns EPISODE_LENGTH, for each agent
        assert summary["policies"][policy]["episode_return_mean"] == pytest.approx(EPISODE_LENGTH)
        assert summary["policies"][policy]["updates"] > 0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert {"a/episode_return_mean", "b/episode_return_mean", "a/losses/none", "b/policy_version"} <= set(lines[-1])
    assert "losses/none" not in lines[-1], "losses are each policy's own"
    # the run's evaluator played each policy's agents with that policy's weights, on an env of its own
    evals = [m for m in lines if m["a/eval/episode_return_mean"] is not None]
    assert evals, "an evaluation round of both policies finished and was reported"
    for m in evals:
        assert m["a/eval/episode_return_mean"] == m["b/eval/episode_return_mean"] == EPISODE_LENGTH
        assert m["eval/episode_return_mean"] == EPISODE_LENGTH and m["b/eval/policy_version"] >= 0


MAPPED = {"adversary_*": "predator", "agent_*": "prey"}


def prey_checkpoint(tmp_path: Path, hidden: list[int]) -> Path:
    """A checkpoint of a 14-input prey network, as a run of its own would have written."""
    import gymnasium as gym

    from srl import checkpoint
    from srl.models.mlp import ActorCriticMLP

    net = ActorCriticMLP(gym.spaces.Box(-np.inf, np.inf, (14,), np.float32), gym.spaces.Discrete(5), hidden_sizes=hidden)
    path = checkpoint.save(tmp_path / "prey-run", 7, 100, net, {})
    assert path is not None
    return path


def test_a_policy_that_does_not_train_only_acts_with_its_checkpoints_weights(tmp_path):
    weights = prey_checkpoint(tmp_path, [64, 64])
    graph = build_graph(tag_config(policy_kwargs={"hidden_sizes": [64, 64]}, policy_mapping=MAPPED,
                                   dataflow={"inference": "policy_worker"},
                                   policies={"predator": {}, "prey": {"trainable": False, "checkpoint": str(weights)}}))
    prey = next(lane for lane in graph.lanes if lane.name == "prey")
    assert not prey.graph.trains and sorted(prey.names.values()) == ["policy:1"]  # no trainer, no parameter service
    assert {s.kind for s in graph.streams if s.name.startswith("prey.")} == {"requests", "replies"}
    with pytest.raises(ConfigError, match=r"field 'policies.prey.checkpoint': .*ckpt-00000007.pt: does not fit this run's policy"):
        build_graph(tag_config(policy_kwargs={"hidden_sizes": [32]}, policy_mapping=MAPPED,
                               policies={"predator": {}, "prey": {"trainable": False, "checkpoint": str(weights)}}))
    with pytest.raises(ConfigError, match=r"field 'policies.prey.checkpoint': a policy that trains starts from"):
        tag_config(policy_mapping=MAPPED, policies={"predator": {}, "prey": {"checkpoint": str(weights)}})
    with pytest.raises(ConfigError, match=r"field 'policies': none of them trains"):
        tag_config(policy_mapping=MAPPED, policies={"predator": {"trainable": False}, "prey": {"trainable": False}})


def test_a_scripted_prey_acts_beside_a_trained_predator(run_dir):
    """A registered scripted policy (random) needs no algorithm and no weights; the run trains
    the predator alone, and srl eval plays both."""
    config = tag_config(policy_mapping=MAPPED, policies={"predator": {}, "prey": {"trainable": False, "policy": "random"}},
                        launch={"launcher": "inline"}, dataflow={"envs_per_actor": 4}, stop={"total_env_steps": 1500},
                        run={"run_dir": str(run_dir)}, monitor={"display": "off"}, eval={"episodes": 1, "interval_s": 0.1})
    assert run_experiment(config) == 0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [m for m in lines if m["predator/eval/episode_return_mean"] is not None]
    assert evals and all(m["prey/eval/policy_version"] == 0 for m in evals)  # the evaluator plays the scripted prey too
    summary = json.loads((run_dir / "summary.json").read_text())["policies"]
    assert summary["predator"]["updates"] > 0 and summary["prey"]["updates"] == 0, summary
    assert summary["prey"]["episodes"] > 0
    assert not (run_dir / "policies" / "prey").exists()
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "eval", str(run_dir), "--episodes", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["policy_versions"] == {"predator": summary["predator"]["policy_version"], "prey": 0}


def params_of(run_dir: Path, *overrides: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "mpe-tag", "run.seed=3", "launch.num_actor_workers=2",
         "dataflow.envs_per_actor=4", "stop.max_updates=4", "monitor.display=off", "run.deterministic=true",
         f"run.run_dir={run_dir}", *overrides],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    policies = json.loads((run_dir / "summary.json").read_text())["policies"]
    assert all(p["policy_version"] == 4 for p in policies.values()), policies
    return {name: p["params_sha256"] for name, p in policies.items()}


def test_two_deterministic_runs_of_two_policies_give_identical_parameters(tmp_path):
    """With a policy worker: the same parameters of each policy on the local and inline launchers;
    with two trainers for the predators (the prey keeps one), the same on local and Ray. Each run
    costs CI about 20 s: a second local run is left out (the inline and Ray runs repeat local
    ones), and so is Ray with one trainer for each policy (the prey's lane on Ray has one)."""
    first = params_of(tmp_path / "a", "dataflow.inference=policy_worker")
    assert first == params_of(tmp_path / "c", "launch.launcher=inline", "dataflow.inference=policy_worker")
    assert first["predator"] != first["prey"]
    two = params_of(tmp_path / "e", "policies.predator.num_trainers=2", "dataflow.inference=policy_worker")
    assert two == params_of(tmp_path / "f", "policies.predator.num_trainers=2", "dataflow.inference=policy_worker",
                            "launch.launcher=ray")


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_policy_with_two_trainers_trains_on_each_of_its_rows_once_beside_one_with_one(transport, run_dir):
    """Policy a's two trainers (one actor each) average their gradients into one step; b keeps one."""
    from recording import load_batches

    config = counting_lanes("local", run_dir, transport=transport)
    config.policies["a"].num_trainers = 2
    config = build_config(config.model_dump())
    graph = build_graph(config)
    assert [s.producers for s in graph.of_kind("gradients")] == [("trainer:0", "trainer:1")]
    assert run_experiment(config) == 0
    for policy, agents, trainers in (("a", {0.0, 2.0}, 2), ("b", {1.0}, 1)):
        batches = load_batches(run_dir / policy)
        assert len({p.name.split("-")[1] for p in (run_dir / policy).glob("batch-*.npz")}) == trainers, policy
        obs = [b["obs"] for b in batches]
        assert set(np.unique(np.concatenate([o[..., 3].ravel() for o in obs]))) == agents, policy
        totals = check_counts(obs, [b["terminated"] for b in batches], EPISODE_LENGTH)
        assert totals["envs"] == 2 * 4 and totals["transitions"] >= 1000 * len(agents), (policy, totals)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and all(summary["policies"][p]["updates"] > 0 for p in "ab"), summary


def test_a_policys_trainer_count_is_checked_as_a_runs(tmp_path):
    with pytest.raises(ConfigError, match=r"field 'policies.a.num_trainers': 3 must divide launch.num_actor_workers \(2\)"):
        build_config({**counting_lanes("local", tmp_path).model_dump(), "policies": {"a": {"num_trainers": 3}, "b": {}}})


@register_worker("segment-tapper", inputs=("samples",))
class SegmentTapper(Worker):
    def poll(self) -> bool:
        return bool(self.inputs["samples"].poll())


@pytest.mark.parametrize("policies, extra, message", [
    (True, {"kind": "segment-tapper"}, r"field 'extra_workers\[0\].policy': None; .* joins one that trains: \['a', 'b'\]"),
    (True, {"kind": "segment-tapper", "policy": "c"}, r"field 'extra_workers\[0\].policy': 'c'"),
    (False, {"kind": "segment-tapper", "policy": "a"}, r"field 'extra_workers\[0\].policy': a one-policy run's"),
], ids=["no-policy", "unknown-policy", "one-policy-run"])  # fmt: skip
def test_an_extra_worker_joins_one_policy_that_trains(policies, extra, message, tmp_path):
    config = counting_lanes("local", tmp_path).model_dump()
    if not policies:
        config.update(policies={}, policy_mapping={})
    with pytest.raises(ConfigError, match=message):
        build_config({**config, "extra_workers": [extra]})


TAG_BUDGET_ENV_STEPS = 50_000  # of the built-in's 1M: training took 56 s at load 10 (100k took 103 s at load 1)


def test_mpe_tag_trained_predators_catch_more_and_the_trained_prey_scores_more_than_random_ones(run_dir):
    """Both policies of mpe-tag learn: the built-in, seed 1, in lock step (run.deterministic, so
    the figures are fixed) on the inline launcher, 50k of its 1M env steps. `srl eval --against
    random --stochastic` plays each policy, sampling its actions, against random opponents beside
    the same 200 episodes with a random player in its place: after one update both score as random
    players do (predators 3.55 against 4.2, a predator scoring 10 per touch; prey -13.8 against
    -14.3), after 50k trained predators score 10.2 (bar: twice random ones, 8.4; 14.35 after 100k)
    and the prey -10.9 (bar: 2 above a random prey, -12.3; -9.70 after 100k; it learns in a few updates to stay in the arena, where a random
    prey pays the boundary penalty). Greedy, an untrained prey already stays in (-10.9).
    The built-in's own bars (predators 3 times random ones, random predators touching the trained
    prey less often than random prey) take its whole run: benchmarks/mpe_tag_bars.py, figures in
    docs/results.md; run here, they made CI 13.6 minutes longer."""
    from srl.config.load import load_config

    config = load_config("mpe-tag", ["launch.launcher=inline", "run.deterministic=true", "run.seed=1",
                                     f"stop.total_env_steps={TAG_BUDGET_ENV_STEPS}", "monitor.display=off",
                                     f"run.run_dir={run_dir}"])  # fmt: skip
    assert run_experiment(config) == 0
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "eval", str(run_dir), "--against", "random",
                           "--episodes", "200", "--stochastic"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    scores = json.loads(proc.stdout)["policies"]
    assert scores["predator"]["return_mean"] > 2 * scores["predator"]["random_return_mean"], scores
    assert scores["prey"]["return_mean"] > scores["prey"]["random_return_mean"] + 2, scores


def test_the_mapping_in_docs_multiagent_is_a_valid_config():
    import re

    import yaml

    doc = (Path(__file__).parent.parent / "docs" / "multiagent.md").read_text()
    values = yaml.safe_load(re.search(r"```yaml\n(.*?)```", doc, re.S).group(1))
    graph = build_graph(build_config(values))
    assert [(lane.name, lane.graph.config.algo_config.lr) for lane in graph.lanes] == [("predator", 1e-3), ("prey", 3e-4)]


def test_the_monitor_keeps_each_policys_episodes_updates_and_restarts_apart():
    from srl.launch.lane_stats import LaneStats
    from srl.launch.monitor import RunMonitor
    from srl.streams.control import Role

    config = tag_config(policy_mapping=MAPPED, policies={"predator": {}, "prey": {}})
    monitor = RunMonitor(config, lanes=[LaneStats.of(lane) for lane in build_graph(config).lanes])
    episodes = {"predator": {"episodes": 3, "episode_returns": [10.0, 20.0, 30.0], "episode_lengths": [25] * 3},
                "prey": {"episodes": 1, "episode_returns": [-5.0], "episode_lengths": [25]}}
    monitor.on_report(Role.ACTOR, 0, {"env_steps": 100, "episode_returns": [10.0, 20.0, 30.0, -5.0],
                                      "episode_lengths": [25] * 4, "episodes": 4, "policies": episodes})
    trained = {"segments_dropped": 0, "policy_version": 5, "losses/policy_loss": 0.5}
    monitor.on_report(Role.TRAINER, 0, {**trained, "updates": 5})
    monitor.on_report(Role.TRAINER, 1, {**trained, "updates": 3, "policy_version": 3, "losses/policy_loss": -0.5})
    monitor.on_restart("trainer:1")  # it had reported version 3; its checkpoint holds version 2
    monitor.on_report(Role.TRAINER, 1, {**trained, "updates": 1, "policy_version": 3, "losses/policy_loss": -0.5})
    metrics = monitor.metrics()
    assert metrics["predator/episode_return_mean"] == 20.0 and metrics["prey/episode_return_mean"] == -5.0
    assert (metrics["predator/updates"], metrics["prey/updates"], metrics["updates_lost"]) == (5, 3, 1)
    assert metrics["predator/losses/policy_loss"] == 0.5 and metrics["prey/losses/policy_loss"] == -0.5
    assert "losses/policy_loss" not in metrics


def test_sides_change_seats_every_episode_and_half_the_envs_start_swapped():
    from srl.envs import make_vector_env

    venv = make_vector_env("pettingzoo-aec", {"module": "pettingzoo.classic.tictactoe_v3",
                                              "sides": ["learner", "opponent"]}, num_envs=2)
    assert venv.agents == ("learner", "opponent")
    mask = venv.observation_space.own_dim - venv.observation_space.mask_dim

    def movers(obs):  # per env, the side whose row carries an action mask: it moves first
        return ["learner" if obs[2 * e, mask:mask + 9].any() else "opponent" for e in range(2)]

    assert movers(venv.reset(seed=0)) == ["learner", "opponent"]
    assert movers(venv.reset(seed=0)) == ["opponent", "learner"]  # the next episode of each env: seats swapped


def test_a_learner_beats_a_scripted_random_legal_opponent_in_tictactoe_from_either_seat(run_dir):
    """Turn-based: the learner (PPO) against the scripted random-legal player, the two changing
    seats every episode (env_kwargs.sides). Random against random, a side's mean return is about
    0; after 30k env steps the learner's is far above it (seed 1)."""
    from srl.config.load import load_config

    config = load_config("tictactoe-ppo", [
        "env_kwargs.sides=[learner, opponent]", "policies={learner: {}, opponent: {trainable: false, policy: random-legal}}",
        "policy_mapping={learner: learner, opponent: opponent}", "launch.launcher=inline", "run.seed=1",
        "stop.total_env_steps=30000", "monitor.display=off", f"run.run_dir={run_dir}",
    ])  # fmt: skip
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())["policies"]
    assert summary["learner"]["episode_return_mean"] > 0.4, summary
    assert summary["opponent"]["updates"] == 0
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "eval", str(run_dir), "--against", "random",
                           "--episodes", "200"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    learner = json.loads(proc.stdout)["policies"]["learner"]
    assert learner["return_mean"] > learner["random_return_mean"] + 0.3, learner


def test_a_resumed_run_continues_each_policy_from_its_own_checkpoint(run_dir):
    config = counting_lanes("local", run_dir)
    config.run.checkpoint_interval_s = 0.5
    assert run_experiment(config) == 0
    first = json.loads((run_dir / "summary.json").read_text())
    again = counting_lanes("local", run_dir)
    # 17k more env steps: on a fast machine 3k were over before a resumed trainer made its first update
    again.run.resume, again.stop.total_env_steps = str(run_dir), 20000
    assert run_experiment(again) == 0
    second = json.loads((run_dir / "summary.json").read_text())
    assert second["env_steps"] >= 20000 and second["launch"] == 2, second
    for policy in ("a", "b"):  # each took up its own parameters where its last checkpoint left them
        before, after = first["policies"][policy], second["policies"][policy]
        assert after["updates"] > 0 and after["policy_version"] == before["policy_version"] + after["updates"], (before, after)


def test_srl_eval_of_several_policies_plays_each_against_a_scripted_player_or_says_what_it_takes(tmp_path):
    """Against a scripted player the baseline is a random player in the evaluated policy's place."""
    from srl.evaluate import evaluate_policies

    run_dir = tmp_path / "ttt"
    config = build_config({"env": "pettingzoo-aec", "env_kwargs": {"module": "pettingzoo.classic.tictactoe_v3",
                                                                   "sides": ["x", "o"]},
                           "policy": "mappo", "policies": {"x": {}, "o": {}}, "policy_mapping": {"x": "x", "o": "o"},
                           "launch": {"launcher": "inline"}, "dataflow": {"envs_per_actor": 4, "sample_length": 8},
                           "stop": {"total_env_steps": 400}, "run": {"run_dir": str(run_dir)},
                           "monitor": {"display": "off"}})  # fmt: skip
    assert run_experiment(config) == 0
    result = evaluate_policies(run_dir, episodes=4, seed=1, against="random-legal")
    assert set(result["policies"]) == {"x", "o"} and result["against"] == "random-legal"
    x = result["policies"]["x"]  # what a run of one policy reports against random, and the game's result
    assert set(x) == {"return_mean", "return_std", "returns", "random_return_mean", "random_return_std",
                      "random_returns", "return_difference", "won_drawn_lost", "opponents"}
    assert sum(x["won_drawn_lost"]) == len(x["returns"]) == len(x["random_returns"]) == 4
    assert x["return_difference"] == pytest.approx(x["return_mean"] - x["random_return_mean"])
    assert set(x["opponents"]) == {"o"} and sum(x["opponents"]["o"]["won_drawn_lost"]) == 4
    with pytest.raises(ConfigError, match=r"no heuristic player for 'pettingzoo.classic.tictactoe_v3'"):
        evaluate_policies(run_dir, episodes=4, seed=1, against="heuristic")
    with pytest.raises(ConfigError, match=r"--against 'nobody': .*scripted policy \(.*random-legal"):
        evaluate_policies(run_dir, episodes=4, seed=1, against="nobody")


def test_a_recurrent_policy_beside_a_feed_forward_one_sees_its_agents_episode_starts(run_dir):
    """Policy b is recurrent: the actor marks episode starts once for every row, and b's rows of
    them reach b's policy and trainer (first = step 0 of a counting episode); a's MLP has none."""
    from recording import load_batches

    config = counting_lanes("local", run_dir, inference="policy_worker")
    config.policies["b"].policy, config.policies["b"].policy_kwargs = "recurrent-actor-critic", {}
    assert run_experiment(build_config(config.model_dump())) == 0
    b, a = load_batches(run_dir / "b"), load_batches(run_dir / "a")
    assert b and a and "first" not in a[0] and "hidden" in b[0]
    for batch in b:
        np.testing.assert_array_equal(batch["first"][:-1], batch["obs"][:-1, ..., 2] == 0)


def test_a_self_play_league_snapshots_the_learner_and_rates_each_snapshot(run_dir):
    """tictactoe: the learner against its league (policies.league.league.of = learner), sides
    changing seats. Snapshots of the learner's checkpoints join the pool every 5 updates; the
    league-pool policy draws an opponent per episode and the games played against each snapshot
    move its Elo and the learner's, in league.json, which srl leaderboard prints."""
    from srl.config.load import load_config
    from srl.population.league import FILE, League

    config = load_config("tictactoe-ppo", [
        "env_kwargs.sides=[learner, league]", "policy_mapping={learner: learner, league: league}",
        "policies={learner: {}, league: {league: {of: learner, snapshot_interval_updates: 5, choose: uniform, "
        "scripted: [random-legal], refresh_s: 0.5}}}",  # quiet, the run takes 3 s: the default 5 s read none
        "launch.launcher=inline", "run.seed=1", "run.checkpoint_interval_s=0.5", "stop.total_env_steps=20000",
        "monitor.display=off", f"run.run_dir={run_dir}",
    ])  # fmt: skip
    assert run_experiment(config) == 0
    league = League.load(run_dir / FILE)
    played = [s for s in league.snapshots.values() if s.games]
    assert len(league.snapshots) >= 3 and len(played) >= 2, league.to_json()
    assert all((run_dir / s.checkpoint).is_file() for s in league.snapshots.values() if not s.scripted)
    assert league.learner_elo != 1200.0 and sum(s.games for s in played) > 100
    assert "random-legal" in league.pool and league.snapshots["random-legal"].games > 10  # a scripted one plays too
    metrics = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1])
    assert metrics["league/learner_elo"] == pytest.approx(league.learner_elo)
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "leaderboard", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and json.loads(proc.stdout)["learner_elo"] == pytest.approx(league.learner_elo)
    from srl.evaluate import evaluate_policies

    best = evaluate_policies(run_dir, episodes=6, seed=1, snapshot="best", against="random-legal")
    assert best["snapshot"] == league.best().name and sum(best["policies"]["learner"]["won_drawn_lost"]) == 6
    oldest = min(league.snapshots.values(), key=lambda s: s.version).name
    assert evaluate_policies(run_dir, episodes=2, seed=1, against=oldest)["against"] == oldest
    with pytest.raises(ConfigError, match=r"--snapshot v999999: no such snapshot"):
        evaluate_policies(run_dir, episodes=2, seed=1, snapshot="v999999")


def test_the_league_keeper_reads_the_opponents_wins_as_the_learners_losses(tmp_path):
    from srl.population.keeper import LeagueKeeper

    config = tag_config(policy_mapping=MAPPED, run={"run_dir": str(tmp_path)},
                        policies={"predator": {"policy": "actor-critic-mlp"}, "prey": {"league": {"of": "predator"}}})
    keeper = LeagueKeeper(config, "prey", config.policies["prey"].league)
    keeper.league.add(20, 1000, "league/v20.pt")
    keeper.on_results({"20": [3, 1, 0], "-1": [5, 0, 0]})  # -1: before any snapshot (random moves)
    snap = keeper.league.snapshots["v20"]
    assert (snap.wins, snap.draws, snap.losses) == (0, 1, 3) and keeper.league.learner_elo < 1200.0
    config = tag_config(policy_mapping=MAPPED, run={"run_dir": str(tmp_path)},
                        policies={"predator": {"policy": "actor-critic-mlp"}, "prey": {"league": {"of": "predator", "scripted": ["random-legal"]}}})
    keeper = LeagueKeeper(config, "prey", config.policies["prey"].league)
    keeper.on_results({"-2": [0, 0, 4]})  # the scripted opponent's tag: it lost 4, the learner won them
    assert keeper.league.pool == ["random-legal"] and keeper.league.snapshots["random-legal"].wins == 4
    for wrong in ("nobody", "mappo"):
        with pytest.raises(ConfigError, match=rf"field 'policies.prey.league.scripted': \['{wrong}'\] are no registered "
                           r"scripted policies; allowed: \[.*'random-legal'"):
            tag_config(policy_mapping=MAPPED, policies={"predator": {}, "prey": {"league": {"of": "predator",
                                                                                          "scripted": [wrong]}}})
    with pytest.raises(ConfigError, match=r"field 'policies.prey.league.of': 'nobody' is no policy that trains"):
        tag_config(policy_mapping=MAPPED, policies={"predator": {}, "prey": {"league": {"of": "nobody"}}})


@pytest.mark.parametrize("a_trainers, victim, restarted", [
    (1, "trainer:1", {"trainer:1": 1}),  # b's one trainer
    (2, "trainer:1", {"trainer:0": 1, "trainer:1": 1}),  # one of a's two: its group restarts together
], ids=["one-trainer", "group-of-two"])  # fmt: skip
def test_a_killed_trainer_of_one_policy_resumes_from_that_policys_checkpoint(a_trainers, victim, restarted, run_dir,
                                                                            capfd):
    """A policy's trainer is SIGKILLed once its policy has a checkpoint: it (with the rest of its
    group) restarts from that policy's newest checkpoint, not from scratch; the other policy's
    trainers go on untouched."""
    from srl import checkpoint

    config = counting_lanes("local", run_dir)
    config.policies["a"].num_trainers = a_trainers
    config = build_config(config.model_dump())
    config.run.checkpoint_interval_s, config.stop.total_env_steps = 0.3, 8000
    policy = next(lane.name for lane in build_graph(config).lanes if victim in lane.names.values())
    killed: list[str | None] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (checkpoint.latest_meta(run_dir / "policies" / policy) or {}).get("version", 0) < 3:
            time.sleep(0.05)
        killed.append(kill_now(os.getpid(), ("trainer",), random.Random(0), name=victim))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    assert run_experiment(config) == 0
    thread.join()
    assert killed[0] is not None and killed[0].endswith(f":{victim}"), killed
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts"] == restarted, summary
    resumed = [int(v) for v in re.findall(r"trainer resumed from checkpoint version (\d+)", capfd.readouterr().err)]
    assert len(resumed) == len(restarted) and min(resumed) >= 3, resumed
    assert summary["policies"][policy]["policy_version"] > max(resumed), summary["policies"][policy]


def test_a_one_policy_run_is_one_lane_under_the_run_names():
    """One policy is a single lane with the empty prefix: its workers, streams and blocks are the
    run's own, named as they always were, and its kernels are built from it (srl.graph.build)."""
    from srl.config.load import load_config

    graph = build_graph(load_config("cartpole-ppo", ["eval.episodes=1"]))
    [lane] = graph.lanes
    assert (lane.name, lane.prefix, lane.rows) == ("", "", (0,))
    assert lane.names == {w.name: w.name for w in graph.workers if not w.name.startswith("actor:")}
    assert [s.name for s in lane.graph.streams] == [s.name for s in graph.streams]
    assert list(graph.block_layouts()) == ["actor0", "incarnations"]
    assert lane.at_run(graph).run_workers == tuple(w.name for w in graph.workers)


def test_a_policys_updates_are_counted_once_with_two_trainers_and_a_one_policy_runs_keys_are_the_runs():
    """The monitor keeps one LaneStats per lane: of a policy whose two trainers take each update
    together, only its first counts them; a run's one policy adds only its losses, under their own names."""
    from srl.launch.lane_stats import LaneStats
    from srl.launch.monitor import RunMonitor
    from srl.streams.control import Role

    config = counting_lanes("local", Path("unused"))
    config.policies["a"].num_trainers = 2
    config = build_config(config.model_dump())
    monitor = RunMonitor(config, lanes=[LaneStats.of(lane) for lane in build_graph(config).lanes])
    for trainer in (0, 1):  # a's trainer:0 and trainer:1: one group, one update each time
        monitor.on_report(Role.TRAINER, trainer, {"segments_dropped": 0, "policy_version": 5, "updates": 5})
    monitor.on_report(Role.TRAINER, 2, {"segments_dropped": 0, "policy_version": 2, "updates": 2})  # b's
    metrics = monitor.metrics()
    assert (metrics["a/updates"], metrics["b/updates"], metrics["updates"]) == (5, 2, 7)

    one = RunMonitor(build_config({"experiment": "m", "total_env_steps": 1000}))
    one.on_report(Role.TRAINER, 0, {"segments_dropped": 0, "policy_version": 3, "updates": 3, "losses/policy_loss": 0.5})
    metrics = one.metrics()
    assert metrics["losses/policy_loss"] == 0.5 and metrics["policy_version"] == 3 and metrics["updates"] == 3
    assert not [k for k in metrics if k.startswith("/")] and one.policy_summary() == {}
