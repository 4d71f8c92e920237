"""Progress toward the stop rules: the ETA kernel on made-up numbers, the live table's rows, and the
plain lines a run writes when its output is not a terminal (nohup, CI, a pipe)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from srl.config import ConfigError
from srl.config.checks import build_config
from srl.config.load import load_config
from srl.launch.run import run_experiment
from srl.monitor import LiveDisplay
from srl.monitor.progress import (
    Estimate,
    Limits,
    PlainProgress,
    ProgressMeter,
    format_eta,
    format_fraction,
    progress_line,
)

REPO = Path(__file__).resolve().parent.parent
LINE = re.compile(
    r"^srl (?P<name>\S+): (?P<steps>\d+) env steps, (?P<rate>\d+|-) steps/s, (?P<updates>\d+) updates, "
    r"return (?P<ret>-?[\d.]+|-)(?: \((?:\w+ (?:-?[\d.]+|-)(?:, )?)+\))?(?: \(target [^)]+\))?"
    r"(?:, eval (?P<eval>-?[\d.]+|-)(?: \(target [^)]+\))?)?, "
    r"(?P<progress>[\d.]+% of \w+|-), "
    r"elapsed (?P<elapsed>[\d:]+), ETA (?P<eta>[\d:]+|-)$"
)
ANSI = re.compile(r"\x1b\[")


def observe(meter: ProgressMeter, samples: list[tuple[float, float, float]]) -> Estimate:
    estimate = None
    for elapsed_s, steps, updates in samples:
        estimate = meter.observe(elapsed_s, steps, updates)
    assert estimate is not None
    return estimate


# ---------------------------------------------------------------- the kernel


def test_eta_toward_the_step_budget_at_the_recent_rate():
    meter = ProgressMeter(Limits(total_env_steps=100_000))
    estimate = observe(meter, [(0.0, 0, 0), (10.0, 10_000, 5)])
    assert estimate.limit == "total_env_steps"
    assert estimate.fraction == pytest.approx(0.1)
    assert estimate.steps_per_s == pytest.approx(1000.0)
    assert estimate.eta_s == pytest.approx(90.0)
    assert format_eta(estimate) == "ETA 1:30"
    assert format_fraction(estimate) == "10.0% of total_env_steps"


def test_the_nearest_limit_wins():
    # 1000 steps/s: the budget is 90 s away, the time limit 40 s, the updates (1/s) 15 s
    samples = [(0.0, 0, 0), (10.0, 10_000, 10)]
    by_time = observe(ProgressMeter(Limits(total_env_steps=100_000, time_limit_s=50)), samples)
    assert (by_time.limit, by_time.eta_s) == ("time_limit_s", pytest.approx(40.0))
    assert by_time.fraction == pytest.approx(0.2)
    by_updates = observe(ProgressMeter(Limits(100_000, max_updates=25, time_limit_s=50)), samples)
    assert (by_updates.limit, by_updates.eta_s) == ("max_updates", pytest.approx(15.0))
    assert by_updates.fraction == pytest.approx(0.4)
    far_time = observe(ProgressMeter(Limits(total_env_steps=100_000, time_limit_s=3600)), samples)
    assert far_time.limit == "total_env_steps" and far_time.eta_s == pytest.approx(90.0)


def test_eta_is_unknown_with_only_a_target_or_no_rate_yet():
    only_target = observe(ProgressMeter(Limits(target_return=475.0)), [(0.0, 0, 0), (10.0, 5000, 3)])
    assert only_target == Estimate(None, None, None, pytest.approx(500.0))
    assert format_eta(only_target) == "ETA -" and format_fraction(only_target) == "-"
    first = ProgressMeter(Limits(total_env_steps=1000)).observe(1.0, 100, 0)  # one sample: no rate
    assert (first.limit, first.fraction, first.eta_s) == ("total_env_steps", pytest.approx(0.1), None)
    assert format_eta(first) == "ETA -"
    # ... but a time limit needs no rate
    timed = ProgressMeter(Limits(total_env_steps=1000, time_limit_s=60)).observe(15.0, 100, 0)
    assert (timed.limit, timed.eta_s) == ("time_limit_s", pytest.approx(45.0))
    stalled = observe(ProgressMeter(Limits(total_env_steps=1000)), [(0.0, 100, 0), (5.0, 100, 0)])
    assert stalled.eta_s is None and stalled.steps_per_s == 0.0


def test_the_rate_is_over_the_recent_window_only():
    meter = ProgressMeter(Limits(total_env_steps=1_000_000), window_s=30.0)
    # 100 steps/s for two minutes (startup, warmup), then 1000 steps/s
    samples = [(float(t), 100.0 * t, 0) for t in range(0, 121, 10)]
    samples += [(120.0 + t, 12_000 + 1000.0 * t, 0) for t in range(10, 61, 10)]
    estimate = observe(meter, samples)
    assert estimate.steps_per_s == pytest.approx(1000.0)
    assert estimate.eta_s == pytest.approx((1_000_000 - 72_000) / 1000.0)


def test_a_reached_limit_says_eta_zero_and_a_clock_that_goes_back_starts_over():
    done = observe(ProgressMeter(Limits(total_env_steps=1000)), [(0.0, 0, 0), (2.0, 1200, 0)])
    assert (done.fraction, done.eta_s, format_eta(done)) == (1.0, 0.0, "ETA 0:00")
    meter = ProgressMeter(Limits(total_env_steps=10_000))
    observe(meter, [(0.0, 0, 0), (10.0, 1000, 0)])
    restarted = meter.observe(1.0, 1100, 0)  # elapsed went back (a new launch): no rate from the old clock
    assert restarted.eta_s is None
    assert meter.observe(2.0, 1300, 0).steps_per_s == pytest.approx(200.0)
    with pytest.raises(ValueError):
        ProgressMeter(Limits(), window_s=0)


def test_eta_rounds_up_so_zero_means_done():
    assert format_eta(Estimate("total_env_steps", 0.6, 0.4, 100.0)) == "ETA 0:01"
    assert format_eta(Estimate("total_env_steps", 0.1, 3725.0, 100.0)) == "ETA 1:02:05"


def test_progress_line_is_plain_and_parses():
    limits = Limits(total_env_steps=1_000_000, target_return=475.0)
    estimate = Estimate("total_env_steps", 0.0123, 485.2, 2034.4)
    metrics = {"env_steps": 12_288, "updates": 24, "episode_return_mean": 23.514, "env_steps_per_s": 99.0}
    line = progress_line("cartpole-ppo", metrics, estimate, limits, elapsed_s=6.0)
    assert line == ("srl cartpole-ppo: 12288 env steps, 2034 steps/s, 24 updates, return 23.51 (target 475), "
                    "1.2% of total_env_steps, elapsed 0:06, ETA 8:06")
    assert LINE.match(line)
    unknown = progress_line("x", {"env_steps": 0, "updates": 0, "episode_return_mean": None},
                            Estimate(None, None, None, None), Limits(target_return=1.0), elapsed_s=0.0)
    assert unknown.endswith("return - (target 1), -, elapsed 0:00, ETA -") and LINE.match(unknown)
    league = {"env_steps": 10, "updates": 1, "episode_return_mean": 0.0, "learner/episode_return_mean": 0.474,
              "league/episode_return_mean": -0.474, "learner/losses/entropy": 0.3, "eval/episode_return_mean": 1.0}
    line = progress_line("connect4-league", league, estimate, Limits(total_env_steps=100), elapsed_s=1.0)
    assert "return 0.00 (league -0.47, learner 0.47), eval 1.00, " in line and LINE.match(line), line


def test_progress_line_puts_the_target_beside_the_return_it_is_held_against():
    estimate = Estimate("total_env_steps", 0.5, 10.0, 100.0)
    metrics = {"env_steps": 10, "updates": 1, "episode_return_mean": 150.0, "eval/episode_return_mean": 236.25}
    training = progress_line("x", metrics, estimate, Limits(target_return=242.0), elapsed_s=1.0)
    assert "return 150.00 (target 242), eval 236.25, 50.0%" in training and LINE.match(training), training
    on_eval = progress_line("x", metrics, estimate, Limits(target_return=242.0, target_on="eval"), elapsed_s=1.0)
    assert "return 150.00, eval 236.25 (target 242), 50.0%" in on_eval and LINE.match(on_eval), on_eval
    assert LINE.match(on_eval)["eval"] == "236.25"


def test_plain_progress_writes_once_per_interval_and_flushes():
    class Stream(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            Stream.flushes += 1

    stream = Stream()
    plain = PlainProgress(stream, interval_s=10.0)
    written = [plain.maybe_write(t, f"line {t:g}") for t in (1.0, 9.9, 10.0, 12.0, 19.9, 20.1, 45.0, 46.0)]
    assert written == [False, False, True, False, False, True, True, False]
    assert stream.getvalue() == "line 10\nline 20.1\nline 45\n"
    assert Stream.flushes == 3


# ---------------------------------------------------------------- on a terminal


def test_live_table_shows_progress_and_eta():
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    with LiveDisplay("cartpole-ppo", enabled=True, console=console) as display:
        display.update({"env_steps": 1000, "progress": "12.5% of total_env_steps", "eta": "7:56"})
    out = buf.getvalue()
    assert "progress" in out and "12.5% of total_env_steps" in out
    assert "ETA" in out and "7:56" in out


# ---------------------------------------------------------------- off a terminal


def test_progress_interval_is_validated():
    for bad in ("monitor.progress_interval_s=0", "monitor.progress_interval_s=-1", "monitor.progress_interval_s=100000"):
        with pytest.raises(ConfigError, match="progress_interval_s"):
            load_config("cartpole-ppo", [bad])
    with pytest.raises(ConfigError, match="display"):
        load_config("cartpole-ppo", ["monitor.display=loud"])


@pytest.mark.parametrize("display, lines", [("auto", True), ("plain", True), ("off", False)])
def test_a_run_off_a_terminal_prints_plain_lines_unless_display_is_off(tmp_path, capsys, display, lines):
    """capsys's stdout is not a terminal: auto shows the plain lines, as nohup or CI would get them."""
    config = build_config({"experiment": "quiet", "env": "CartPole-v1", "policy": "random", "algorithm": "none",
                           "launcher": "inline", "total_env_steps": 20_000, "run_dir": str(tmp_path),
                           "display": display, "log_interval_s": 0.1, "progress_interval_s": 0.1,
                           "learning_curve": False, "tracker": []})
    assert run_experiment(config) == 0
    out = capsys.readouterr().out
    found = [line for line in out.splitlines() if LINE.match(line)]
    assert bool(found) == lines, out
    assert not ANSI.search(out), out
    for line in found:
        assert LINE.match(line)["progress"].endswith("of total_env_steps"), line


def spawn_srl(*args: str) -> subprocess.Popen:
    # as a plain nohup run gets it: block-buffered stdout, no forced colours
    scrub = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "PYTHONUNBUFFERED")
    env = {k: v for k, v in os.environ.items() if k not in scrub}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")])
    return subprocess.Popen([sys.executable, "-m", "srl.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)


def test_a_run_under_a_pipe_prints_progress_while_it_runs(run_dir):
    """stdout a pipe, as under nohup or in CI: a plain progress line comes while the run still goes
    (each is flushed), not only at the end; the run's last line gives the steps/s of the whole run.
    The run's 40 lines at most (20 s) fit in a pipe's buffer: without the flush none would come before the end."""
    proc = spawn_srl("run", "cartpole-ppo", "launch.launcher=inline", f"run.run_dir={run_dir}", "stop.total_env_steps=100000000",
                     "stop.target_return=null", "stop.time_limit_s=20", "monitor.progress_interval_s=0.5", "monitor.log_interval_s=0.25",
                     "monitor.learning_curve=false")
    try:
        first = proc.stdout.readline()  # blocks until a line is flushed through the pipe
        running = proc.poll() is None
        assert LINE.match(first.rstrip("\n")), first + proc.stderr.read()
        assert running, "the line came before the run ended"
        second = proc.stdout.readline()
        proc.send_signal(signal.SIGTERM)  # stops like Ctrl-C: the run ends cleanly, with its summary
        rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    out = first + second + rest
    assert not ANSI.search(out) and not ANSI.search(err), (out, err)
    assert "[/" not in out and "[bold" not in out, out  # no rich markup left in the text
    matches = [LINE.match(line) for line in out.splitlines() if line]
    assert all(matches), out  # stdout holds the progress lines only
    first_match, last_match = matches[0], matches[-1]
    assert first_match["name"] == "cartpole-ppo"
    assert int(last_match["steps"]) > int(first_match["steps"]) > 0
    # the time limit is nearer than 10^8 steps, and needs no rate: known from the first line on
    assert first_match["progress"].endswith("% of time_limit_s") and first_match["eta"] != "-", first
    summary = json.loads((run_dir / "summary.json").read_text())
    stopped = [line for line in err.splitlines() if line.startswith("stopped:")]
    assert stopped and f"env_steps/s={summary['env_steps_per_s']} " in stopped[-1], err
    # over the whole launch: no more than the steps over the command's wall time allow
    assert summary["env_steps"] / summary["env_steps_per_s"] <= summary["wall_time_s"] + 0.1
