"""Evaluation outputs: the learning-curve PNG of a run and `srl eval --video` MP4s."""

import json
import re
import sys

import pytest
import torch

from srl import checkpoint
from srl.cli import main
from srl.config import ConfigError
from srl.config.load import load_config
from srl.evaluate import evaluate_run
from srl.graph import build_graph, make_policy
from srl.launch.outputs import RunOutputs
from srl.monitor.plot import CURVE_FILE, PlotUnavailable, plot_learning_curve, read_curves

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_metrics(run_dir, rows):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_learning_curve_png(tmp_path):
    rows = [{"env_steps": 0, "time_s": 0.5, "episode_return_mean": None}]
    rows += [{"env_steps": 1000 * i, "time_s": 1.0 * i, "episode_return_mean": 10.0 * i} for i in range(1, 6)]
    rows[3]["eval/episode_return_mean"] = 42.0
    write_metrics(tmp_path, rows)
    curves = read_curves(tmp_path / "metrics.jsonl")
    assert curves["episode_return_mean"][0] == (1000.0, 1.0, 10.0)  # the report without a return is skipped
    assert curves["eval/episode_return_mean"] == [(3000.0, 3.0, 42.0)]
    path = plot_learning_curve(tmp_path, target=45.0)
    assert path == tmp_path / CURVE_FILE and path.read_bytes()[:8] == PNG_MAGIC


def test_a_resumed_runs_wall_time_runs_on(tmp_path):
    """Each launch's time_s starts at 0 (resume=RUN_DIR appends to the same metrics.jsonl); the
    curve's time axis goes on from where the previous launch ended."""
    launches = [[(1000, 1.0), (2000, 2.0)], [(2500, 0.5), (3000, 1.5)], [(3500, 1.0)]]
    write_metrics(tmp_path, [{"env_steps": steps, "time_s": t, "episode_return_mean": 1.0}
                             for launch in launches for steps, t in launch])
    times = [t for _, t, _ in read_curves(tmp_path / "metrics.jsonl")["episode_return_mean"]]
    assert times == [1.0, 2.0, 2.5, 3.5, 4.5]


def test_learning_curve_needs_a_return_and_matplotlib(tmp_path, monkeypatch):
    assert plot_learning_curve(tmp_path) is None  # no metrics file
    write_metrics(tmp_path, [{"env_steps": 10, "time_s": 1.0, "episode_return_mean": None}])
    assert plot_learning_curve(tmp_path) is None and not (tmp_path / CURVE_FILE).exists()
    write_metrics(tmp_path, [{"env_steps": 10, "time_s": 1.0, "episode_return_mean": 3.0}])
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(PlotUnavailable, match=r"srl\[plot\]"):
        plot_learning_curve(tmp_path)


@pytest.mark.parametrize("enabled", [True, False])
def test_run_outputs_write_the_curve_unless_disabled(tmp_path, enabled):
    config = load_config("cartpole-ppo", [f"run.run_dir={tmp_path}", f"monitor.learning_curve={str(enabled).lower()}"])
    outputs = RunOutputs(config, started_s=0.0)
    assert outputs.write_learning_curve() == (None if not enabled else "no learning curve: no episode finished")
    write_metrics(tmp_path, [{"env_steps": 10, "time_s": 1.0, "episode_return_mean": 3.0}])
    assert outputs.write_learning_curve() is None
    assert (tmp_path / CURVE_FILE).exists() == enabled


def saved_run(run_dir, experiment="cartpole-ppo", overrides=()):
    """A run dir with config.yaml and a checkpoint of an untrained policy."""
    config = load_config(experiment, [f"run.run_dir={run_dir}", *overrides])
    RunOutputs(config, started_s=0.0)  # writes config.yaml
    graph = build_graph(config)
    torch.manual_seed(0)
    policy = make_policy(config, graph.observation_space, graph.action_space)
    checkpoint.save(run_dir, 3, 100, policy, {})
    return run_dir


def test_eval_video_writes_every_step_of_the_episodes(tmp_path):
    import imageio.v2 as imageio

    run_dir = saved_run(tmp_path / "run")
    video = tmp_path / "out" / "episodes.mp4"
    result = evaluate_run(run_dir, episodes=2, seed=0, video=video)
    assert result["video"] == str(video) and result["policy_version"] == 3
    assert result["video_frames"] == sum(result["returns"])  # CartPole: reward 1 per step, a frame per step
    reader = imageio.get_reader(str(video))
    frame = reader.get_data(0)
    assert frame.shape == (400, 600, 3) and frame.std() > 0  # a drawn cart, not a blank frame
    assert reader.count_frames() == result["video_frames"]
    reader.close()


def test_eval_video_errors_are_clear(tmp_path, monkeypatch):
    run_dir = saved_run(tmp_path / "run")
    with pytest.raises(ConfigError, match=r"must end in \.mp4"):
        evaluate_run(run_dir, episodes=1, seed=0, video=tmp_path / "x.avi")
    counting = saved_run(tmp_path / "counting", overrides=["env=counting", "policy=random", "algorithm=none", "algo="])
    with pytest.raises(ConfigError, match="not a Gymnasium env"):
        evaluate_run(counting, episodes=1, seed=0, video=tmp_path / "x.mp4")
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if the extra were not installed
    with pytest.raises(ConfigError, match=r"srl\[video\]"):
        evaluate_run(run_dir, episodes=1, seed=0, video=tmp_path / "x.mp4")
    assert not (tmp_path / "x.mp4").exists()


def test_srl_eval_video_cli(tmp_path, capsys):
    run_dir = saved_run(tmp_path / "run")
    video = tmp_path / "v.mp4"
    assert main(["eval", str(run_dir), "--episodes", "1", "--video", str(video)]) == 0
    assert json.loads(capsys.readouterr().out.strip())["video"] == str(video) and video.stat().st_size > 0
    assert main(["eval", str(run_dir), "--video", str(tmp_path / "v.gif")]) == 2
    assert ".mp4" in capsys.readouterr().err


def test_a_runs_install_hint_prints_verbatim(run_dir, monkeypatch, capsys):
    """The note printed when the curve cannot be drawn keeps its `srl[plot]`: rich would read the
    brackets as a style tag and print `pip install 'srl'`."""
    from srl.launch.run import run_experiment

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    overrides = ["launch.launcher=inline", "stop.target_return=null", "stop.total_env_steps=1000", "monitor.display=off",
                 f"run.run_dir={run_dir}"]
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    err = capsys.readouterr().err
    assert "pip install 'srl[plot]'" in err


@pytest.mark.parametrize("env_id, why", [
    ("srl-test/NoRenderMode-v0", r"render_modes'\] is \[\]"),
    ("srl-test/TakesRenderMode-v0", r"render_modes'\] is \[\]"),
    ("render_envs:srl-test/NoRenderMode-v0", r"render_modes'\] is \[\]"),
    ("srl-test/Factory-v0", "takes no render_mode"),
    ("srl-test/DrawsNothing-v0", r"render\(\) returned None"),
])
def test_srl_eval_video_of_an_env_that_does_not_render_is_one_line(tmp_path, capsys, env_id, why):
    """A Gymnasium env without rgb_array rendering: `srl eval --video` says so in one line (exit 2),
    naming the env and what to do, instead of a traceback from inside Gymnasium."""
    overrides = [f"env={env_id}", "modules=render_envs", "env_backend=loop"]
    run_dir = saved_run(tmp_path / "run", overrides=overrides)
    assert main(["eval", str(run_dir), "--episodes", "1", "--video", str(tmp_path / "v.mp4")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"srl: --video: env '{env_id}' cannot render rgb_array frames (")
    assert re.search(why, err) and "without --video" in err
    assert not (tmp_path / "v.mp4").exists()
