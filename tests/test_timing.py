"""Time breakdown: the stopwatch kernel, the controller's table, and what a real run saves."""

from __future__ import annotations

import json
import time

import pytest

from srl.config.checks import build_config
from srl.config.load import load_config
from srl.launch.run import run_experiment
from srl.monitor.timing import (
    CATEGORIES,
    ENV_STEP,
    INFERENCE,
    OTHER,
    REPLAY,
    SEND_RECV,
    TRAINING,
    BreakdownTable,
    TimeBreakdown,
)


def test_switch_charges_the_category_left_and_categories_add_up_to_wall_time():
    clock = TimeBreakdown()
    started = time.perf_counter()
    previous = clock.switch(ENV_STEP)
    time.sleep(0.05)
    assert clock.switch(INFERENCE) == ENV_STEP
    time.sleep(0.02)
    clock.switch(previous)
    taken = clock.take()
    wall = time.perf_counter() - started
    assert previous == OTHER
    # lower bounds only (a loaded machine oversleeps): each interval went to its own category
    assert taken[ENV_STEP] >= 0.05 and taken[INFERENCE] >= 0.02
    assert sum(taken.values()) == pytest.approx(wall, abs=2e-3)
    assert clock.take()[ENV_STEP] == 0.0  # take resets


def test_table_sums_reports_per_worker_and_formats_percentages():
    table = BreakdownTable()
    table.add("actor:0", {ENV_STEP: 1.0, OTHER: 1.0})
    table.add("actor:0", {ENV_STEP: 2.0})
    table.add("trainer:0", {"waiting": 4.0})
    d = table.as_dict()
    assert d["actor:0"][ENV_STEP] == 3.0 and d["actor:0"]["wall"] == 4.0
    assert d["trainer:0"]["wall"] == 4.0
    text = table.format()
    assert "75.0%" in text and "25.0%" in text and "100.0%" in text


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_run_saves_a_breakdown_per_worker(launcher, tmp_path):
    config = build_config({
        "experiment": "timing", "env": "CartPole-v1", "policy": "random", "algorithm": "none",
        "launcher": launcher, "inference": "policy_worker", "total_env_steps": 20_000, "run_dir": str(tmp_path), "display": "off",
    })
    assert run_experiment(config) == 0
    saved = json.loads((tmp_path / "time_breakdown.json").read_text())
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["time_breakdown"] == saved
    assert set(saved) == {"actor:0", "policy:0", "trainer:0", "params:0"}
    for worker, seconds in saved.items():
        assert set(seconds) == {*CATEGORIES, "wall"}, worker
        assert seconds["wall"] > 0
    assert saved["actor:0"][ENV_STEP] > 0 and saved["policy:0"][INFERENCE] > 0
    assert saved["trainer:0"]["send_recv"] > 0


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_replay_workers_label_their_time(launcher, tmp_path):
    """A DQN run: the replay trainer's updates are `training` and the buffer's memory work is
    `replay`; before they kept clocks of their own, 91-99% of the trainer's wall time was `other`."""
    overrides = [f"launch.launcher={launcher}", "stop.total_env_steps=4000", "stop.target_return=null", f"run.run_dir={tmp_path}",
                 "monitor.display=off", "run.seed=1"]
    config = load_config("cartpole-dqn", overrides)
    assert run_experiment(config) == 0
    saved = json.loads((tmp_path / "time_breakdown.json").read_text())
    trainer, buffer = saved["trainer:0"], saved["buffer:0"]
    print(json.dumps({"trainer": trainer, "buffer": buffer}))
    assert trainer[TRAINING] > 0 and trainer[SEND_RECV] > 0
    assert trainer[OTHER] < 0.1 * trainer["wall"]  # reports and the checkpoints only
    assert buffer[REPLAY] > 0 and buffer[SEND_RECV] > 0
    assert buffer[OTHER] < 0.1 * buffer["wall"]
