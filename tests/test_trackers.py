"""Trackers (srl.monitor.trackers): TensorBoard, W&B and MLflow get the same metrics at the same
steps, the run's config and its learning curve, offline, read back with each one's own format or
client; a missing package is one ConfigError before launch; a tracker that fails ends the run with
one line naming it."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import yaml
from wandb_records import read_offline_run

from srl.config import ConfigError
from srl.config.load import load_config
from srl.launch.run import run_experiment
from srl.monitor.plot import CURVE_FILE
from srl.monitor.trackers import flat_params, missing_package

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
# a tiny real run: PPO updates (so losses/* exist) and finished episodes (so a curve) in a few seconds
TINY = ["launch.launcher=inline", "stop.total_env_steps=8192", "monitor.log_interval_s=0.2", "stop.target_return=null", "monitor.display=off",
        "run.checkpoint_interval_s=600"]
WANDB_INTERNAL = ("_step", "_runtime", "_timestamp")


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No network and nothing outside tmp_path: W&B offline, MLflow's default artifact root in the cwd."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    for name in ("WANDB_PROJECT", "WANDB_ENTITY", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for this to use a file: store
    monkeypatch.chdir(tmp_path)
    yield
    import wandb

    wandb.teardown()  # W&B's service process ends with the test


def run(run_dir: Path, *overrides: str) -> dict:
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", *TINY, *overrides])
    code = run_experiment(config)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert code == 0, summary
    return summary


def tensorboard_scalars(tb_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    assert "config/text_summary" in acc.Tags()["tensors"]  # the config, as text
    return {tag: sorted((e.step, e.value) for e in acc.Scalars(tag)) for tag in acc.Tags()["scalars"]}


def wandb_scalars(history: list[dict]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for row in history:
        for name, value in row.items():
            if name not in WANDB_INTERNAL:
                out.setdefault(name, []).append((row["env_steps"], value))
    return {name: sorted(points) for name, points in out.items()}


def mlflow_client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def mlflow_run(client, experiment: str, run_id: str):
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`srl.run_id` = '{run_id}'")
    assert len(runs) == 1, runs
    return runs[0]


def mlflow_scalars(client, run) -> dict[str, list[tuple[int, float]]]:
    return {name: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, name))
            for name in run.data.metrics}


def same_points(a: dict[str, list[tuple[int, float]]], b: dict[str, list[tuple[int, float]]]) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert [s for s, _ in a[name]] == [s for s, _ in b[name]], name
        for (_, x), (_, y) in zip(a[name], b[name]):
            assert math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6), (name, x, y)  # TensorBoard keeps float32


def test_every_tracker_logs_the_same_metrics_config_and_curve(tmp_path, offline):
    run_dir = tmp_path / "run"
    uri = f"file:{run_dir / 'mlruns'}"
    summary = run(run_dir, "monitor.tracker=[tensorboard,wandb,mlflow]", f"monitor.mlflow_tracking_uri={uri}")
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["monitor"]["tracker"] == ["tensorboard", "wandb", "mlflow"]
    assert (run_dir / CURVE_FILE).read_bytes()[:8] == PNG_MAGIC

    tb = tensorboard_scalars(run_dir / "tb")
    assert {"env_steps", "episode_return_mean", "losses/value_loss", "time_s"} <= set(tb)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert sorted(s for s, _ in tb["env_steps"]) == sorted(r["env_steps"] for r in rows)  # every report

    (wandb_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    wb = read_offline_run(wandb_file)
    same_points(tb, wandb_scalars(wb.history))
    assert (wb.run_id, wb.project, wb.group, wb.name) == (summary["run_id"], "srl", "cartpole-ppo", run_dir.name)
    assert {k: v for k, v in wb.config.items() if k != "_wandb"} == config
    assert {CURVE_FILE, "summary.json"} <= set(wb.files)
    assert (wandb_file.parent / "files" / CURVE_FILE).read_bytes()[:8] == PNG_MAGIC
    assert wb.exit_code == 0

    client = mlflow_client(uri)
    ml = mlflow_run(client, "cartpole-ppo", summary["run_id"])
    same_points(tb, mlflow_scalars(client, ml))
    assert ml.info.status == "FINISHED" and ml.info.run_name == run_dir.name
    assert ml.data.params == flat_params(config)
    assert float(ml.data.params["algo.gamma"]) == config["algo"]["gamma"] and ml.data.params["env"] == "CartPole-v1"
    artifacts = {a.path for a in client.list_artifacts(ml.info.run_id)}
    assert {CURVE_FILE, "summary.json", "config.yaml"} <= artifacts
    logged = yaml.safe_load(Path(client.download_artifacts(ml.info.run_id, "config.yaml", str(tmp_path))).read_text())
    assert logged == config


def test_mlflow_tracking_uri_from_the_environment_and_resume_continues_its_run(tmp_path, offline, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run_dir = tmp_path / "run"
    first = run(run_dir, "monitor.tracker=mlflow")
    assert not (run_dir / "tb").exists()  # tensorboard only when asked for
    second = run(run_dir, f"run.resume={run_dir}", "stop.total_env_steps=16384")
    assert second["run_id"] == first["run_id"] and second["launch"] == 2

    client = mlflow_client(uri)
    ml = mlflow_run(client, "cartpole-ppo", first["run_id"])  # one MLflow run for both launches
    assert ml.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(ml.info.run_id, "env_steps")]
    assert max(steps) == second["env_steps"] and min(steps) <= first["env_steps"]
    launches = {m.value for m in client.get_metric_history(ml.info.run_id, "launch")}
    assert launches == {1.0, 2.0}
    assert ml.data.params["stop.total_env_steps"] == "8192"  # params keep the first launch's; config.yaml is the last's
    logged = yaml.safe_load(Path(client.download_artifacts(ml.info.run_id, "config.yaml", str(tmp_path))).read_text())
    assert logged["stop"]["total_env_steps"] == 16384


def test_wandb_project_from_the_config(tmp_path, offline):
    run_dir = tmp_path / "run"
    summary = run(run_dir, "monitor.tracker=wandb", "monitor.wandb_project=my-project")
    (wandb_file,) = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    wb = read_offline_run(wandb_file)
    assert (wb.project, wb.run_id) == ("my-project", summary["run_id"])
    assert any("losses/value_loss" in row for row in wb.history)
    assert not (run_dir / "tb").exists()


@pytest.mark.parametrize("name", ["wandb", "mlflow"])
def test_a_missing_tracker_package_is_one_config_error(monkeypatch, name):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda mod, *a: None if mod == name else real(mod, *a))
    with pytest.raises(ConfigError) as raised:
        load_config("cartpole-ppo", [f"monitor.tracker=[tensorboard,{name}]"])
    message = str(raised.value)
    assert "\n" not in message and "field 'monitor.tracker'" in message
    assert f"pip install 'srl[{name}]'" in message
    assert missing_package("tensorboard") is None


def test_unknown_tracker_names_the_allowed_ones():
    with pytest.raises(ConfigError, match="tensorboard.*wandb.*mlflow"):
        load_config("cartpole-ppo", ["monitor.tracker=neptune"])
    assert load_config("cartpole-ppo", ["monitor.tracker=wandb,wandb"]).monitor.tracker == ["wandb"]
    assert load_config("cartpole-ppo", ["monitor.tracker=[]"]).monitor.tracker == []
    assert load_config("cartpole-ppo", []).monitor.tracker == ["tensorboard"]


def test_a_tracker_that_cannot_start_ends_the_run_with_one_line(tmp_path, offline, capsys):
    run_dir = tmp_path / "run"
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", *TINY, "monitor.tracker=mlflow",
                                          "monitor.mlflow_tracking_uri=nosuchstore://nowhere"])
    assert run_experiment(config) == 1
    err = capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "write failed"
    assert "nosuchstore://nowhere (mlflow): " in summary["error"], summary
    assert err.count(summary["error"]) == 1 and "Traceback" not in err, err


def test_a_tracker_failing_mid_run_ends_it_and_marks_its_run_failed(tmp_path, offline, capsys, monkeypatch):
    from mlflow.tracking import MlflowClient

    real, batches = MlflowClient.log_batch, [0]

    def log_batch(self, run_id, metrics=(), *args, **kwargs):
        if metrics:
            batches[0] += 1
            if batches[0] > 3:
                raise ConnectionError("tracking server went away")
        return real(self, run_id, metrics, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", log_batch)
    run_dir = tmp_path / "run"
    uri = f"file:{run_dir / 'mlruns'}"
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", *TINY, "stop.total_env_steps=10000000", "monitor.tracker=mlflow",
                                          f"monitor.mlflow_tracking_uri={uri}"])
    assert run_experiment(config) == 1
    err = capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "write failed"
    assert f"{uri} (mlflow): tracking server went away" in summary["error"], summary
    assert err.count(summary["error"]) == 1 and "Traceback" not in err, err
    ml = mlflow_run(mlflow_client(uri), "cartpole-ppo", summary["run_id"])
    assert ml.info.status == "FAILED"
    assert len(mlflow_client(uri).get_metric_history(ml.info.run_id, "env_steps")) == 3


def test_flat_params():
    config = {"seed": 1, "algo": {"lr": 0.001, "clip": None}, "modules": ["a", "b"], "env_kwargs": {}, "env": "x"}
    assert flat_params(config) == {"seed": "1", "algo.lr": "0.001", "algo.clip": "null", "modules": '["a", "b"]',
                                   "env_kwargs": "{}", "env": "x"}
