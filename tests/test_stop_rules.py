"""The run's stop rules (srl.workers.stop.StopRules) and the controller's observers
(srl.launch.observers), checked by hand: no workers, no processes."""

from __future__ import annotations

from typing import Any

import pytest

from srl.config import LeagueSpec
from srl.config.checks import build_config
from srl.launch.monitor import RunMonitor
from srl.launch.observers import ObservedReport
from srl.streams.control import Role
from srl.workers.stop import LockStepStop, Stop, StopKind, StopRules


def test_each_rule_fires_alone_with_its_kind_and_the_printed_reason():
    rules = StopRules(total_env_steps=1000, target_return=50.0, max_updates=7, time_limit_s=10.0, window=3)
    assert rules.decide(updates=6, env_steps=999, elapsed_s=9.9) is None
    assert rules.decide(7, 0) == Stop(StopKind.MAX_UPDATES, "max_updates 7 reached")
    assert rules.decide(0, 1000) == Stop(StopKind.TOTAL_ENV_STEPS, "total_env_steps 1000 reached")
    assert rules.decide(0, 0, elapsed_s=10.0) == Stop(StopKind.TIME_LIMIT, "time_limit_s 10.0 reached")
    assert rules.decide(0, 0, elapsed_s=None) is None, "a time limit not yet counting (stepping, before steps)"
    assert rules.target(60.0, 2) is None, "the window is not full"
    assert rules.target(49.9, 3) is None
    assert rules.target(50.0, 3) == Stop(StopKind.TARGET, "target_return 50.0 reached (mean of last 3 episodes: 50.00)")
    assert rules.target(51.0, 9, by="pod:1") == Stop(
        StopKind.TARGET, "target_return 50.0 reached by pod:1 (mean of its last 3 episodes: 51.00)")
    assert rules.eval_target([40.0, 62.0]) == Stop(
        StopKind.TARGET, "target_return 50.0 reached by the evaluator (mean of its last round, 2 deterministic "
                         "episodes: 51.00)")
    assert rules.eval_target([]) is None and rules.eval_target([49.0]) is None
    assert StopRules(10).target(1e9, 10**6) is None and StopRules(10).eval_target([1e9]) is None, "no target"


def test_rules_fire_in_order_target_max_updates_total_env_steps_time_limit():
    rules = StopRules(total_env_steps=10, target_return=1.0, max_updates=1, time_limit_s=1.0)
    target = rules.target(2.0, 100)
    assert rules.decide(1, 10, 1.0, target) is target
    assert rules.decide(1, 10, 1.0).kind is StopKind.MAX_UPDATES
    assert rules.decide(0, 10, 1.0).kind is StopKind.TOTAL_ENV_STEPS
    assert rules.decide(0, 9, 1.0).kind is StopKind.TIME_LIMIT


def test_rules_of_the_config_say_whose_seconds_the_time_limit_counts():
    config = build_config({"experiment": "m", "total_env_steps": 500, "time_limit_s": 3})
    assert StopRules.of(config.stop).decide(0, 0, 3.0).reason == "time_limit_s 3.0 reached"
    config.stop.time_limit_counts = "launch"
    rules = StopRules.of(config.stop)
    assert (rules.total_env_steps, rules.time_limit_s) == (500, 3.0)
    assert rules.decide(0, 0, 3.0).reason == "time_limit_s 3.0 reached (stop.time_limit_counts=launch)"


def test_a_lock_step_stop_travels_typed_in_the_report_and_the_monitor_reads_its_kind():
    stop = LockStepStop(StopRules(total_env_steps=100, max_updates=2))
    assert stop.report() == {"stop_reason": None}
    stop.after_update(2, 10, [])
    assert stop.report() == {"stop_reason": "max_updates 2 reached", "stop_kind": "max_updates"}
    assert Stop.from_report(stop.report()) == stop.stop
    m = RunMonitor(build_config({"experiment": "m", "deterministic": True, "total_env_steps": 1000}))
    m.on_report(Role.TRAINER, 0, {"updates": 2, "segments_dropped": 0, "policy_version": 2, **stop.report()})
    assert m.stop() == Stop(StopKind.MAX_UPDATES, "max_updates 2 reached") and m.target_reached_s is None


def test_the_monitor_returns_a_typed_stop_and_times_only_a_target():
    m = RunMonitor(build_config({"experiment": "m", "total_env_steps": 10**6, "target_return": 5.0}))
    m.on_report(Role.ACTOR, 0, {"env_steps": 10, "episode_returns": [6.0] * 100, "episode_lengths": [1] * 100})
    stop = m.stop()
    assert stop is not None and stop.kind is StopKind.TARGET and m.target_reached_s is not None
    assert stop.reason == "target_return 5.0 reached (mean of last 100 episodes: 6.00)"


class Recorder:
    """An observer that writes down what the monitor passes on, in order."""

    def __init__(self, name: str, log: list[Any], commands: list[tuple[int, dict[str, Any]]]) -> None:
        self.name, self.log, self.commands = name, log, commands

    def on_report(self, report: ObservedReport) -> None:
        self.log.append((self.name, "report", report.role, report.index, report.leads, report.env_steps, report.final))

    def on_metrics(self) -> dict[str, Any]:
        self.log.append((self.name, "metrics"))
        return {f"{self.name}/seen": sum(1 for entry in self.log if entry[0] == self.name)}

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]:
        out, self.commands = self.commands, []
        return out

    def on_finish(self) -> None:
        self.log.append((self.name, "finish"))


def test_observers_get_each_report_metrics_row_and_the_finish_in_order():
    log: list[Any] = []
    m = RunMonitor(build_config({"experiment": "m", "total_env_steps": 1000}))
    m.observers += [Recorder("a", log, [(1, {"type": "adopt"})]), Recorder("b", log, [])]
    m.on_report(Role.ACTOR, 0, {"env_steps": 7, "episode_returns": [], "episode_lengths": []})
    m.on_report(Role.TRAINER, 0, {"updates": 1, "segments_dropped": 0, "policy_version": 1}, final=True)
    metrics = m.metrics()
    assert m.take_commands() == [(1, {"type": "adopt"})] and m.take_commands() == []
    m.finish()
    assert log == [
        ("a", "report", Role.ACTOR, 0, False, 7, False), ("b", "report", Role.ACTOR, 0, False, 7, False),
        ("a", "report", Role.TRAINER, 0, True, 7, True), ("b", "report", Role.TRAINER, 0, True, 7, True),
        ("a", "metrics"), ("b", "metrics"), ("a", "finish"), ("b", "finish"),
    ]
    assert metrics["a/seen"] == 3 and metrics["b/seen"] == 3


def test_a_league_keeper_is_an_observer_of_its_learners_reports_and_its_opponents_games(tmp_path):
    from srl.population.keeper import LeagueKeeper
    from srl.population.league import FILE

    config = build_config({"experiment": "m", "total_env_steps": 1000})
    config.run.run_dir = str(tmp_path)
    keeper = LeagueKeeper(config, "prey", LeagueSpec(of="predator", choose="uniform"))
    assert (tmp_path / FILE).is_file(), "the empty table is written at once: the actors read it"
    keeper.league.add(20, 1000, "league/v20.pt")
    games = {"prey": {"episodes": 1, "episode_returns": [], "episode_lengths": [], "results": {"20": [1, 0, 0]}}}
    keeper.on_report(ObservedReport(Role.ACTOR, 0, {"policies": games}, None, False, 10))
    keeper.on_report(ObservedReport(Role.TRAINER, 0, {"policies": games}, "prey", True, 10))  # not an actor's
    assert keeper.league.snapshots["v20"].losses == 1, "the opponents' games (won: the snapshot lost), from actors only"
    assert keeper.on_metrics() == {"league/learner_elo": keeper.league.learner_elo} and not keeper.changed
    assert keeper.take_commands() == []


@pytest.mark.parametrize("kind", list(StopKind))
def test_a_reports_stop_kind_is_one_of_the_rules(kind):
    from srl.launch.reports import FIELDS

    assert FIELDS["stop_kind"](kind.value) and not FIELDS["stop_kind"]("target") and not FIELDS["stop_kind"](None)
