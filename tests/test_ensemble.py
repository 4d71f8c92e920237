"""Pod ensembles: the member kernel (evaluate, save, adopt) and whole tournament runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from srl import checkpoint, leaderboard
from srl.checks import check_config
from srl.cli import main
from srl.config import ConfigError
from srl.evaluate import evaluate_run
from srl.graph import build_graph
from srl.launch.run import run_experiment
from srl.load import load_config
from srl.workers.member import make_member


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def small_config(tmp_path: Path, *overrides: str):
    return load_config(
        "cartpole-pod-ensemble",
        [f"run.run_dir={tmp_path}", "monitor.display=off", "dataflow.envs_per_actor=16", "pod.ensemble.population=2",
         "pod.ensemble.eval_interval_updates=2", "pod.ensemble.eval_episodes=4", *overrides],
    )


def test_member_evaluates_saves_and_adopts_a_perturbed_copy(tmp_path):
    config = small_config(tmp_path)
    a, b = make_member(config, 0), make_member(config, 1)
    try:
        for m in (a, b):
            m.start()
            for _ in range(2):
                m.poll()
        [event] = a.take_events()
        assert a.take_events() == [] and len(b.take_events()) == 1
        assert event["member"] == 0 and event["env_steps"] == 2 * 16 * 16 and event["adoptions"] == 0
        assert event["hparams"] == {"lr": 0.01} and 1 <= event["eval_return"] <= 500
        assert a.evaluate() == event["eval_return"]  # same seed, same weights: same episodes
        saved = torch.load(event["checkpoint"], weights_only=True)
        assert saved["hparams"] == {"lr": 0.01} and saved["env_steps"] == event["env_steps"]
        assert checkpoint.params_sha256(a.pod.policy) != checkpoint.params_sha256(b.pod.policy)

        b.adopt(event["checkpoint"], {"lr": 0.0125})
        assert checkpoint.params_sha256(a.pod.policy) == checkpoint.params_sha256(b.pod.policy)
        opt_a, opt_b = a.pod.algorithm.optimizer, b.pod.algorithm.optimizer
        assert all(torch.equal(x, y) for x, y in zip(opt_a.exp_avg_sq, opt_b.exp_avg_sq))
        assert b.pod.algorithm.config.lr == 0.0125 and b.adoptions == 1
        assert b.report()["hparams"] == {"lr": 0.0125}
        with pytest.raises(ValueError, match="gamma"):
            b.adopt(event["checkpoint"], {"gamma": 0.5})  # not a perturbed hyperparameter
    finally:
        a.close(), b.close()


def test_out_of_range_perturbations_are_not_taken(tmp_path):
    config = small_config(tmp_path, "pod.ensemble.perturb=[lr,gamma]")
    m = make_member(config, 0)
    try:
        m.start()
        m.poll(), m.poll()
        [event] = m.take_events()
        m.adopt(event["checkpoint"], {"lr": 0.02, "gamma": 0.99 * 1.25})  # gamma <= 1
        assert m.hparams() == {"lr": 0.02, "gamma": 0.99}
    finally:
        m.close()


def test_ensemble_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="ensemble.population"):
        load_config("cartpole-pod-ensemble", ["pod.ensemble.population=0"])
    with pytest.raises(ConfigError, match=r"ensemble.perturb.*epochs.*allowed: .*lr"):
        build_graph(small_config(tmp_path, "pod.ensemble.perturb=[epochs]"))
    with pytest.raises(ConfigError, match="need pod.enabled=true"):
        build_graph(load_config("cartpole-ppo", ["pod.ensemble.population=2"]))
    config = small_config(tmp_path)
    config.run.resume = str(tmp_path)  # as resume= gives it, past the saved config's own checks
    with pytest.raises(ConfigError, match="'run.resume'"):
        check_config(config)
    graph = build_graph(small_config(tmp_path, "pod.ensemble.population=3"))
    assert [w.name for w in graph.workers] == ["pod:0", "pod:1", "pod:2"]
    assert {s.name for s in graph.streams} == {"control", "evals", "adopt"}


def test_inline_ensemble_writes_a_leaderboard(tmp_path):
    config = small_config(tmp_path, "launch.launcher=inline", "stop.max_updates=24", "stop.target_return=null")
    assert run_experiment(config) == 0
    table = leaderboard.read(tmp_path)
    assert table["population"] == 2 and 1 <= len(table["entries"]) <= 5
    returns = [e["eval_return"] for e in table["entries"]]
    assert returns == sorted(returns, reverse=True)
    kept = sorted(p.name for p in (tmp_path / leaderboard.FOLDER).iterdir())
    assert kept == sorted(Path(e["checkpoint"]).name for e in table["entries"])  # nothing else left
    csv_rows = (tmp_path / leaderboard.CSV_NAME).read_text().splitlines()
    assert csv_rows[0].startswith("rank,member,env_steps,eval_return,hp.lr") and len(csv_rows) == 1 + len(returns)


def test_ensemble_replaces_laggards_and_its_best_member_solves_cartpole(tmp_path, capsys):
    """Three pods as processes, within a fixed env-step budget (all members together): at least
    one replacement, and the best leaderboard entry solves CartPole (>= 475 on 8 greedy episodes).
    The run usually stops early because a member's last 100 training episodes reach 475."""
    config = load_config(
        "cartpole-pod-ensemble",
        [f"run.run_dir={tmp_path}", "monitor.display=off", "run.seed=1", "pod.ensemble.population=3", "stop.total_env_steps=2000000",
         "pod.ensemble.eval_interval_updates=8", "pod.ensemble.eval_episodes=8"],
    )
    assert run_experiment(config) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["error"] is None and summary["stop_reason"].startswith(("target_return", "total_env_steps"))
    table = leaderboard.read(tmp_path)
    assert len(table["replacements"]) >= 1, table
    assert table["entries"][0]["eval_return"] >= 475.0, table["entries"]
    # the best entry is the run's checkpoint: srl eval runs it
    result = evaluate_run(tmp_path, episodes=3, seed=5)
    assert result["return_mean"] >= 400.0
    assert main(["leaderboard", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "leaderboard: population 3" in out and "replacement(s)" in out
    assert main(["leaderboard", str(tmp_path / "members")]) == 2


def test_without_eval_episodes_a_member_is_scored_by_its_training_episodes(tmp_path):
    config = small_config(tmp_path, "pod.ensemble.eval_episodes=0", "pod.ensemble.eval_interval_updates=1")
    m = make_member(config, 0)
    try:
        assert m.eval_env is None
        m.start()
        returns: list[float] = []
        while not m.events:  # no event before the first finished episode
            m.poll()
            returns += m.pod.finished_returns
            m.report()  # empties the pod's lists: the member must have kept its own
        [event] = m.take_events()
        assert returns and event["eval_return"] == pytest.approx(sum(returns) / len(returns))
    finally:
        m.close()


def test_ray_member_actor_works_in_bursts_and_reports_errors(tmp_path, monkeypatch):
    """The Ray actor class as a plain object (no Ray runtime): bursts give messages, adopt
    commands reach the kernel, a failure comes back as an error message with its traceback."""
    import ray

    from srl.launch import ray_members
    from srl.launch.ray_members import MemberActor

    # a member titles its process; here that would be the test process, whose workers later
    # tests find by their titles (Ray's setproctitle moves this process's argv for good)
    monkeypatch.setattr(ray_members, "_set_title", lambda title: None)

    config = small_config(tmp_path, "pod.ensemble.eval_interval_updates=1")
    wrong = MemberActor(config, 0, controller_host="203.0.113.9")
    [error] = wrong.work([], 0.0)
    assert error["type"] == "error" and "must run on the manager's host" in error["payload"]["traceback"]
    actor = MemberActor(config, 1, controller_host=ray.util.get_node_ip_address())
    try:
        messages = []
        while not any(m["type"] == "eval" for m in messages):
            messages += actor.work([], 0.05)
        event = next(m for m in messages if m["type"] == "eval")["payload"]
        actor.work([{"type": "adopt", "checkpoint": event["checkpoint"], "hparams": {"lr": 1e-3}}], 0.0)
        assert actor.kernel.adoptions == 1 and actor.kernel.hparams() == {"lr": 1e-3}
        assert actor.finish()["type"] == "final" and actor.kernel is None
    finally:
        if actor.kernel is not None:
            actor.kernel.close()
