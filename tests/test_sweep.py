"""`srl sweep`: the sweep file's checks, a real (tiny) CartPole sweep with one and two trials at
once, resuming from study.db (an interrupted trial retried), pruning, and Ctrl-C of the sweep."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

import srl
from srl.cli import main
from srl.config import ConfigError
from srl.config.load import load_config
from srl.sweep.run import plan_sweep, run_sweep
from srl.sweep.spec import parse_spec
from srl.sweep.study import INTERRUPTED, STUDY_FILE, STUDY_NAME, open_study, suggest

TINY = ["launch.launcher=inline", "stop.total_env_steps=3000", "monitor.learning_curve=false", "monitor.display=off", "run.checkpoint_interval_s=600"]
SPACE = {"algo.lr": {"log_uniform": [1.0e-4, 3.0e-3]}, "algo.epochs": {"int": [2, 6]},
         "dataflow.envs_per_actor": {"choice": [8, 16]}}


def sweep_file(tmp_path: Path, name: str = "sweep.yaml", **fields) -> str:
    values = {"objective": "episode_return_mean", "trials": 3, "overrides": TINY, "space": SPACE, **fields}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values, sort_keys=False))
    return str(path)


def load_study(sweep_dir: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY_NAME, storage=f"sqlite:///{sweep_dir / STUDY_FILE}")


@pytest.mark.parametrize("fields, named", [
    ({"trails": 3}, "'trails': unknown field"),
    ({"space": {"algo.lr": {"normal": [0, 1]}}}, "'space.algo.lr.normal'"),
    ({"space": {"algo.lr": {"uniform": [0.1, 0.01]}}}, "'space.algo.lr': uniform: low 0.1 is above high 0.01"),
    ({"space": {"algo.lr": {"log_uniform": [0, 0.01]}}}, "'space.algo.lr': log_uniform: bounds must be positive"),
    ({"space": {"algo.lr": {}}}, "'space.algo.lr': give exactly one of"),
    ({"space": {}}, "'space'"),
    ({"objective": "return"}, "'objective'"),
    ({"trials": 0}, "'trials'"),
    ({"pruner": {"hyperband": {}}}, "'pruner': one of none, median, percentile, threshold"),
    ({"pruner": {"median": {"warmup": 3}}}, "'pruner.median': unknown argument 'warmup'"),
    ({"overrides": ["run.seed=3"]}, "the sweep sets run.seed itself (use trial_seed"),
    ({"space": {"run_dir": {"choice": ["a"]}}}, "the sweep sets run.run_dir itself"),
    ({"space": {"target_return": {"choice": [1]}, "stop.target_return": {"choice": [2]}}},
     "config keys 'target_return' and 'stop.target_return' both set 'stop.target_return'"),
])
def test_sweep_file_errors_name_the_field(fields, named):
    values = {"objective": "episode_return_mean", "space": SPACE, **fields}
    with pytest.raises(ConfigError) as e:
        parse_spec(values, "sweep.yaml")
    assert named in str(e.value), str(e.value)
    assert str(e.value).startswith("sweep.yaml: ")


@pytest.mark.parametrize("space, named", [
    ({"algo.nope": {"uniform": [0.0, 1.0]}}, "space.algo.nope: "),
    ({"envs_per_actor": {"choice": [8, 0]}}, "space.dataflow.envs_per_actor: dataflow.envs_per_actor=0"),
    ({"bogus_key": {"int": [1, 2]}}, "unknown field 'bogus_key'"),
])
def test_a_bad_key_or_value_in_the_space_is_named_before_any_trial(tmp_path, space, named):
    path = sweep_file(tmp_path, space=space)
    with pytest.raises(ConfigError) as e:
        plan_sweep("cartpole-ppo", path, str(tmp_path / "sweep"), [])
    assert named in str(e.value), str(e.value)
    assert not (tmp_path / "sweep").exists()  # nothing started, nothing written


def test_the_cli_names_the_field_and_exits_2(tmp_path, capsys):
    path = sweep_file(tmp_path, space={"algo.lrr": {"uniform": [0.0, 1.0]}})
    assert main(["sweep", "cartpole-ppo", path, "--dir", str(tmp_path / "sweep")]) == 2
    assert "space.algo.lrr" in capsys.readouterr().err


def test_time_to_target_needs_a_target(tmp_path):
    path = sweep_file(tmp_path, objective="time_to_target_s")
    with pytest.raises(ConfigError, match="needs target_return"):
        plan_sweep("cartpole-ppo", path, str(tmp_path / "sweep"), ["stop.target_return=null"])


def test_sweep_runs_trials_two_at_once_then_resumes_with_one_more(tmp_path, capsys):
    """Two trials two at once; then, after a sweep 'killed' with a trial running, trials: 3 with one
    at a time: the interrupted trial is marked so and its parameters run again, as the third."""
    sweep_dir = tmp_path / "sweep"
    assert run_sweep("cartpole-ppo", sweep_file(tmp_path, trials=2, parallel=2, baseline=True), str(sweep_dir)) == 0
    first = capsys.readouterr().out
    assert "0 of 2 trials done, 2 at once" in first
    study = load_study(sweep_dir)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    baseline = study.trials[0]  # cartpole-ppo's own values first (epochs 10 is outside the range: kept)
    assert baseline.user_attrs["baseline"]
    assert baseline.params == {"algo.lr": 1e-3, "algo.epochs": 10, "dataflow.envs_per_actor": 16}

    # a sweep killed with a trial running leaves it RUNNING in study.db
    spec = plan_sweep("cartpole-ppo", sweep_file(tmp_path, trials=3, parallel=1), str(sweep_dir), []).spec
    killed = open_study(sweep_dir, spec, "cartpole-ppo", []).ask()
    lost = suggest(killed, spec)
    assert run_sweep("cartpole-ppo", sweep_file(tmp_path, trials=3, parallel=1), str(sweep_dir)) == 0
    out = capsys.readouterr().out
    assert "2 of 3 trials done, 1 at once" in out
    assert out.count(" started: ") == 1  # only the retry ran

    trials = load_study(sweep_dir).trials
    assert trials[2].state == optuna.trial.TrialState.FAIL and trials[2].user_attrs[INTERRUPTED]
    assert trials[3].state == optuna.trial.TrialState.COMPLETE and trials[3].params == lost
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 3

    with open(sweep_dir / "results.csv") as f:
        table = list(csv.DictReader(f))
    assert sorted(row["state"] for row in table[:3]) == ["complete"] * 2 + ["complete (baseline)"]
    assert table[3]["state"] == "interrupted"
    best = max(complete, key=lambda t: t.value)
    assert table[0]["trial"] == str(best.number)
    assert float(table[0]["episode_return_mean (objective)"]) == pytest.approx(best.value, rel=1e-3)
    assert "| trial | state |" in (sweep_dir / "results.md").read_text()
    assert f"trial-{best.number:04d}" in out  # the printed table names the trials' run dirs

    config = load_config(str(sweep_dir / "best.yaml"))
    assert config.algo.lr == best.params["algo.lr"]
    assert config.algo.epochs == best.params["algo.epochs"]
    assert config.dataflow.envs_per_actor == best.params["dataflow.envs_per_actor"]
    assert config.run.seed == best.user_attrs["seed"] == best.number  # sweep seed 0 + the trial's number
    assert (config.stop.total_env_steps, config.launch.launcher) == (3000, "inline")  # the fixed overrides
    trial_config = yaml.safe_load((Path(best.user_attrs["run_dir"]) / "config.yaml").read_text())
    assert trial_config["algo"]["lr"] == best.params["algo.lr"]  # what the trial itself ran with


def test_a_pruned_trial_is_stopped_cleanly(tmp_path):
    """threshold below an unreachable return prunes at the first checkpoint: the trial (local
    launcher: a controller and its workers) is stopped like Ctrl-C and writes its summary."""
    sweep_dir = tmp_path / "sweep"
    path = sweep_file(tmp_path, objective="time_to_target_s", trials=1, report_every_env_steps=1000,
                      pruner={"threshold": {"lower": 1.0e9}},
                      overrides=["launch.launcher=local", "stop.total_env_steps=5000000", "stop.time_limit_s=120", "stop.target_return=475",
                                 "monitor.learning_curve=false", "monitor.display=off"])
    assert run_sweep("cartpole-ppo", path, str(sweep_dir)) == 0
    (trial,) = load_study(sweep_dir).trials
    assert trial.state == optuna.trial.TrialState.PRUNED
    assert trial.user_attrs["exit_code"] == 130  # ended by its Ctrl-C, not killed
    summary = trial.user_attrs["summary"]
    assert summary["stop_reason"] == "interrupted" and summary["env_steps"] < 5_000_000
    assert (Path(trial.user_attrs["run_dir"]) / "summary.json").is_file()
    assert not (sweep_dir / "best.yaml").exists()  # no trial completed: no best config
    with open(sweep_dir / "results.csv") as f:
        assert next(csv.DictReader(f))["state"] == "pruned"


def test_ctrl_c_stops_the_running_trials_and_the_sweep_continues_later(tmp_path):
    sweep_dir = tmp_path / "sweep"
    path = sweep_file(tmp_path, trials=1, overrides=["launch.launcher=local", "stop.total_env_steps=5000000",
                                                     "monitor.learning_curve=false", "monitor.display=off"])
    env = {**os.environ, "PYTHONPATH": str(Path(srl.__file__).resolve().parent.parent)}
    from test_shutdown import as_from_a_terminal

    sweep = subprocess.Popen([sys.executable, "-m", "srl.cli", "sweep", "cartpole-ppo", path, "--dir", str(sweep_dir)],
                             preexec_fn=as_from_a_terminal,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = sweep_dir / "trial-0000" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.is_file() and metrics.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.2)
    sweep.send_signal(signal.SIGINT)
    out, _ = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, out
    assert "run the same command to continue" in out
    summary = yaml.safe_load((sweep_dir / "trial-0000" / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted"
    (trial, retry) = load_study(sweep_dir).trials
    assert trial.state == optuna.trial.TrialState.FAIL and trial.user_attrs[INTERRUPTED]
    assert retry.state == optuna.trial.TrialState.WAITING  # queued again, with the same values
    assert retry.system_attrs["fixed_params"] == trial.params


def test_a_resumed_study_draws_new_points(tmp_path):
    """The sampler is seeded again on resume: with the first run's seed it would repeat its draws."""
    spec = parse_spec({"objective": "episode_return_mean", "space": SPACE, "seed": 3}, "sweep.yaml")
    first = open_study(tmp_path, spec, "cartpole-ppo", [])
    trial = first.ask()
    drawn = suggest(trial, spec)
    first.tell(trial, 1.0)
    again = open_study(tmp_path, spec, "cartpole-ppo", []).ask()
    assert suggest(again, spec) != drawn
    fresh = open_study(tmp_path / "other", spec, "cartpole-ppo", []).ask()
    assert suggest(fresh, spec) == drawn  # the same seed, a new study: the same first point


def test_a_study_of_another_space_is_refused(tmp_path):
    spec = parse_spec({"objective": "episode_return_mean", "space": SPACE}, "sweep.yaml")
    open_study(tmp_path, spec, "cartpole-ppo", [])
    other = parse_spec({"objective": "episode_return_mean", "space": {"algo.lr": {"uniform": [0.1, 0.2]}}}, "s.yaml")
    with pytest.raises(ConfigError, match="made with space="):
        open_study(tmp_path, other, "cartpole-ppo", [])
    with pytest.raises(ConfigError, match="made with overrides="):
        open_study(tmp_path, spec, "cartpole-ppo", ["stop.total_env_steps=5"])


def test_a_ray_sweep_runs_every_trial_on_one_cluster_two_at_once(tmp_path, capsys):
    """launch.launcher=ray: the sweep starts one local Ray instance; both trials join it (their configs
    name its address, their placement.json its node) and run at once; best.yaml leaves it out."""
    ray_tiny = ["launch.launcher=ray", "launch.num_actor_workers=1", *TINY[1:]]
    path = sweep_file(tmp_path, trials=2, parallel=2, overrides=ray_tiny, space={"algo.epochs": {"int": [2, 6]}})
    sweep_dir = tmp_path / "sweep"
    assert run_sweep("cartpole-ppo", path, str(sweep_dir)) == 0
    out = capsys.readouterr().out
    assert "2 at once, on the Ray cluster at " in out
    address = out.split("on the Ray cluster at ")[1].split(")")[0]
    trials = load_study(sweep_dir).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2
    nodes = set()
    for t in trials:
        run_dir = Path(t.user_attrs["run_dir"])
        assert yaml.safe_load((run_dir / "config.yaml").read_text())["launch"]["ray_address"] == address
        nodes |= {where["node_id"] for where in json.loads((run_dir / "placement.json").read_text()).values()}
    assert len(nodes) == 1  # one cluster: this machine's one node
    assert load_config(str(sweep_dir / "best.yaml")).launch.ray_address is None
    started = [line for line in out.splitlines() if " started: " in line]
    first_done = next(i for i, line in enumerate(out.splitlines()) if " done: " in line)
    assert len(started) == 2 and all(out.splitlines().index(s) < first_done for s in started)  # at once
