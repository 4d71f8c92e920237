"""The test seams are one config section, `debug.*` (srl.config.DebugConfig): checked like every
other section, and read from the run's config where they act."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

import srl.launch.local as local_launcher
import srl.launch.shell as shell
from srl.config import RUN_ID_PREFIX_ENV, ConfigError, ExperimentConfig
from srl.config.load import load_config
from srl.graph import build_graph
from srl.monitor.timing import TimeBreakdown


def test_the_debug_section_is_read_and_checked_as_every_section():
    config = load_config("cartpole-ppo", ["debug.record_param_digests=true", "debug.record_streams=true",
                                          "debug.jitter_max_s=0.004", "debug.run_id_prefix=abc9"])
    assert config.debug.record_param_digests and config.debug.record_streams
    assert (config.debug.jitter_max_s, config.debug.run_id_prefix) == (0.004, "abc9")
    for bad in ("debug.jitter_max_s=-1", "debug.run_id_prefix=a/b", "debug.record_everything=true"):
        with pytest.raises(ConfigError, match=r"debug\.(jitter_max_s|run_id_prefix|record_everything)"):
            load_config("cartpole-ppo", [bad])


def test_the_run_id_prefix_defaults_to_the_sessions(monkeypatch):
    """A test session gives every run it starts its prefix through the environment (tests/conftest.py)."""
    monkeypatch.setenv(RUN_ID_PREFIX_ENV, "sess1")
    assert ExperimentConfig().debug.run_id_prefix == "sess1"
    assert ExperimentConfig(debug={"run_id_prefix": "mine"}).debug.run_id_prefix == "mine"
    monkeypatch.delenv(RUN_ID_PREFIX_ENV)
    assert ExperimentConfig().debug.run_id_prefix == ""


class Named(Exception):
    pass


def test_a_runs_id_begins_with_the_configured_prefix(monkeypatch):
    """Its shared memory and socket directory are named by the run id (srl.launch.local)."""
    named = []

    def ipc_dir(run_id: str):
        named.append(run_id)
        raise Named

    monkeypatch.setattr(local_launcher, "make_ipc_dir", ipc_dir)
    graph = build_graph(load_config("cartpole-ppo", ["debug.run_id_prefix=zz7"]))
    with pytest.raises(Named):
        local_launcher.run_workers(graph, None, None, None)  # type: ignore[arg-type]
    assert named[0].startswith("zz7") and len(named[0]) == 3 + 8


class Counting:
    """A kernel with nothing to do, and a link that says stop after `polls` polls."""

    def __init__(self, polls: int) -> None:
        self.polls, self.left = polls, polls
        self.receivers: list = []
        self.clock = TimeBreakdown()
        self.commands: list = []

    def start(self) -> None:
        pass

    def poll(self) -> bool:
        self.left -= 1
        return True

    def report(self) -> dict:
        return {}

    def finish(self) -> dict:
        return {}

    def poll_stop(self) -> bool:
        return self.left <= 0

    def take_commands(self) -> list:
        return []

    def send(self, kind, payload) -> None:
        pass


@pytest.mark.parametrize("jitter_max_s", [0.0, 0.5])
def test_the_worker_loop_pauses_before_each_poll_as_debug_jitter_max_s_says(monkeypatch, jitter_max_s):
    slept: list[float] = []
    monkeypatch.setattr(shell, "time", SimpleNamespace(monotonic=time.monotonic, sleep=slept.append))
    kernel = Counting(polls=20)
    transport = SimpleNamespace(take_rejected=dict, take_dropped=dict, wait=lambda *a: None)
    shell.run_kernel_loop(kernel, kernel, transport, None, jitter_max_s)
    if jitter_max_s == 0:
        assert slept == []
    else:
        assert len(slept) >= kernel.polls and all(0 <= s <= jitter_max_s for s in slept) and len(set(slept)) > 1
