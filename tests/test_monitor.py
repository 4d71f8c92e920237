"""srl.monitor: the episode window, the metrics recorder, the live display."""

from __future__ import annotations

import io
import json
import time

import pytest
from rich.console import Console

from srl.monitor import LiveDisplay, Recorder, ReturnWindow, format_duration, print_summary

# ---------------------------------------------------------------- ReturnWindow


def test_return_window_empty():
    w = ReturnWindow()
    assert w.mean_return is None
    assert w.mean_length is None
    assert w.count == 0
    assert len(w) == 0


def test_return_window_means_and_count():
    w = ReturnWindow(size=100)
    w.add([1.0, 2.0, 3.0], [10, 20, 30])
    assert w.mean_return == pytest.approx(2.0)
    assert w.mean_length == pytest.approx(20.0)
    assert w.count == 3
    w.add([], [])
    assert w.count == 3
    w.add([6.0], [40])
    assert w.mean_return == pytest.approx(3.0)
    assert w.mean_length == pytest.approx(25.0)


def test_return_window_slides():
    w = ReturnWindow(size=3)
    w.add(range(10), [1] * 10)  # keeps 7, 8, 9
    assert w.count == 10
    assert len(w) == 3
    assert w.mean_return == pytest.approx(8.0)
    w.add([100.0], [4])  # keeps 8, 9, 100
    assert w.mean_return == pytest.approx(39.0)
    assert w.mean_length == pytest.approx(2.0)
    assert w.count == 11


def test_return_window_matches_naive_mean_over_many_adds():
    w = ReturnWindow(size=100)
    all_returns: list[float] = []
    for i in range(1000):
        batch = [((i * 7919 + j) % 500) / 3.0 for j in range(i % 4)]
        w.add(batch, [int(r) for r in batch])
        all_returns.extend(batch)
    tail = all_returns[-100:]
    assert w.mean_return == pytest.approx(sum(tail) / len(tail))
    assert w.count == len(all_returns)


def test_a_report_carries_the_last_window_of_its_episodes_and_counts_them_all():
    from srl.monitor.episodes import WINDOW, episodes_report

    returns = [float(i) for i in range(3 * WINDOW + 7)]
    report = episodes_report(returns, [1] * len(returns))
    assert report["episodes"] == len(returns) and report["episode_returns"] == returns[-WINDOW:]
    whole, truncated = ReturnWindow(WINDOW), ReturnWindow(WINDOW)
    for chunk in (returns[:50], returns[50:]):  # two reports: the same window either way
        whole.add(chunk, [1] * len(chunk))
        part = episodes_report(chunk, [1] * len(chunk))
        truncated.add(part["episode_returns"], part["episode_lengths"], part["episodes"])
    assert (truncated.count, truncated.mean_return) == (whole.count, whole.mean_return)
    with pytest.raises(ValueError, match="fewer than the window"):  # a bigger window would miss some
        ReturnWindow(2 * WINDOW).add(part["episode_returns"], part["episode_lengths"], part["episodes"])
    with pytest.raises(ValueError):
        ReturnWindow().add([1.0, 2.0], [1, 1], count=1)


def test_return_window_rejects_mismatch_and_bad_size():
    with pytest.raises(ValueError):
        ReturnWindow(size=0)
    with pytest.raises(ValueError):
        ReturnWindow().add([1.0, 2.0], [1])


# ---------------------------------------------------------------- Recorder


def _read_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_recorder_writes_json_lines_with_time(tmp_path):
    start = time.time() - 1.5
    rec = Recorder(tmp_path, start_time_s=start)
    rec.write({"env_steps": 100, "charts/episode_return_mean": 12.5, "losses/value_loss": None})
    # flushed on every write: readable before close
    rows = _read_lines(tmp_path / "metrics.jsonl")
    assert len(rows) == 1
    rec.write({"env_steps": 200, "charts/episode_return_mean": float("nan"), "episodes": 3})
    rec.close()
    rec.close()  # idempotent
    rows = _read_lines(tmp_path / "metrics.jsonl")
    assert len(rows) == 2
    first, second = rows
    assert first["env_steps"] == 100
    assert first["charts/episode_return_mean"] == 12.5
    assert first["losses/value_loss"] is None
    assert 1.5 <= first["time_s"] < 60
    assert first["time_s"] == round(first["time_s"], 3)
    assert second["charts/episode_return_mean"] is None  # NaN is not JSON
    assert second["episodes"] == 3
    assert second["time_s"] >= first["time_s"]
    with pytest.raises(RuntimeError):
        rec.write({"env_steps": 1})


def test_recorder_appends_to_existing_file(tmp_path):
    with Recorder(tmp_path, start_time_s=time.time()) as rec:
        rec.write({"env_steps": 1})
    with Recorder(tmp_path, start_time_s=time.time()) as rec:
        rec.write({"env_steps": 2})
    assert [r["env_steps"] for r in _read_lines(tmp_path / "metrics.jsonl")] == [1, 2]


def test_recorder_tensorboard_scalars_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from srl.monitor.trackers import TensorBoardTracker

    tracker = TensorBoardTracker(tmp_path / "tb")
    rec = Recorder(tmp_path, start_time_s=time.time(), trackers=[tracker])
    rec.write({"env_steps": 100, "charts/episode_return_mean": 12.5, "note": "text", "x": None})
    rec.write({"env_steps": 300, "charts/episode_return_mean": 40.0, "losses/value_loss": 0.25})
    rec.close()
    tracker.close()

    tb_dir = tmp_path / "tb"
    assert any(p.name.startswith("events.out.tfevents") for p in tb_dir.iterdir())
    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "charts/episode_return_mean" in tags
    assert "losses/value_loss" in tags
    assert "note" not in tags and "x" not in tags
    events = acc.Scalars("charts/episode_return_mean")
    assert [e.step for e in events] == [100, 300]
    assert [e.value for e in events] == pytest.approx([12.5, 40.0])
    (loss,) = acc.Scalars("losses/value_loss")
    assert loss.step == 300 and loss.value == pytest.approx(0.25)


# ---------------------------------------------------------------- LiveDisplay

_METRICS = {
    "env_steps": 123456,
    "charts/env_steps_per_s": 4321.0,
    "charts/episode_return_mean": 187.25,
    "episodes": 789,
    "charts/policy_version": 42,
    "updates": 42,
    "charts/policy_lag_mean": 0.5,
    "time_s": 3725.0,
}


def test_live_display_disabled_does_nothing():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True)
    with LiveDisplay("cartpole-ppo", enabled=False, console=console) as display:
        display.update(_METRICS)
    assert buf.getvalue() == ""
    assert display._live is None


def test_live_display_not_a_terminal_does_nothing():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=False)
    with LiveDisplay("cartpole-ppo", enabled=True, console=console) as display:
        assert not display.enabled
        display.update(_METRICS)
    assert buf.getvalue() == ""


def test_live_display_enabled_renders():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with LiveDisplay("cartpole-ppo", enabled=True, console=console) as display:
        assert display.enabled
        display.update({"env_steps": 1000})
        display.update(_METRICS)
    out = buf.getvalue()
    assert "cartpole-ppo" in out
    assert "123,456" in out  # env steps
    assert "4,321" in out  # env steps/s
    assert "187.25" in out  # mean return
    assert "789" in out
    assert "42" in out
    assert "0.50" in out  # policy lag
    assert "1:02:05" in out  # elapsed


def test_live_display_missing_metrics_render_as_dash():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with LiveDisplay("x", enabled=True, console=console) as display:
        display.update({"env_steps": 10, "episode_return_mean": None})
    out = buf.getvalue()
    assert "mean return" in out and "-" in out


def test_print_summary():
    buf = io.StringIO()
    console = Console(file=buf, width=120)
    print_summary(
        {"env_steps": 50000, "episode_return_mean": 480.123, "reached": True, "time_s": 65.0, "extra": {"a": 1}},
        console=console,
    )
    out = buf.getvalue()
    assert "50,000" in out
    assert "480.12" in out
    assert "True" in out
    assert "1:05" in out
    assert "extra/a" in out


def test_format_duration():
    assert format_duration(5) == "0:05"
    assert format_duration(65.9) == "1:05"
    assert format_duration(3725) == "1:02:05"
    assert format_duration(-1) == "0:00"


# ---------------------------------------------------------------- text goes out verbatim
# rich parses "[...]" in a str as markup: an install hint `pip install 'srl[plot]'` would print as
# `pip install 'srl'`. Every place that shows names, values or notes must print them as plain text.

def test_live_display_shows_brackets_verbatim():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with LiveDisplay("exp[plot]", enabled=True, console=console) as display:
        display.update({"env_steps": 10, "episode_return_mean": "n/a [bold]x[/bold]"})
    out = buf.getvalue()
    assert "exp[plot]" in out
    assert "[bold]x[/bold]" in out


def test_print_summary_shows_brackets_verbatim():
    buf = io.StringIO()
    summary = {"error": "pip install 'srl[plot]'", "nested": {"k[0]": 1}}
    print_summary(summary, console=Console(file=buf, width=120), title="run [x]")
    out = buf.getvalue()
    assert "pip install 'srl[plot]'" in out
    assert "nested/k[0]" in out
    assert "run [x]" in out


def test_leaderboard_table_shows_brackets_verbatim():
    from srl.population import leaderboard

    table = {"population": 2, "replacements": [], "members": [],
             "entries": [{"member": 0, "env_steps": 100, "eval_return": 1.5, "hparams": {"lr": 1e-3},
                          "checkpoint": "/tmp/lb/m0[a].pt", "time_s": 1.0, "lineage": "m0[red]"}]}
    buf = io.StringIO()
    Console(file=buf, width=200).print(leaderboard.render(table))
    out = buf.getvalue()
    assert "m0[red]" in out and "m0[a].pt" in out


# ---------------------------------------------------------------- the run's rate at exit

def test_a_runs_final_rate_is_over_the_whole_run(tmp_path, capsys):
    """summary.json's env_steps_per_s counts every env step over the run's whole time, so it lies
    between the steps over the wall time (longer) and over the span of the metrics rows (shorter);
    the last row's own rate is over the fraction of a second since the row before."""
    from srl.config.checks import build_config
    from srl.launch.run import run_experiment

    config = build_config({"experiment": "rate", "env": "CartPole-v1", "policy": "random", "algorithm": "none",
                           "launcher": "inline", "total_env_steps": 30_000, "run_dir": str(tmp_path),
                           "display": "off", "log_interval_s": 0.2})
    assert run_experiment(config) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps, rate = summary["env_steps"], summary["env_steps_per_s"]
    assert len(rows) >= 2 and steps >= 30_000
    span_s = rows[-1]["time_s"] - rows[0]["time_s"]
    # 1% for the rounding of the times and the rate
    assert 0.99 * steps / summary["wall_time_s"] <= rate <= 1.01 * steps / span_s
    assert f"env_steps/s={rate}" in capsys.readouterr().err
