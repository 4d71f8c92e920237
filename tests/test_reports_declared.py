"""Each role's report is declared once (srl.streams.reports, a TypedDict per role): what its
kernels send holds only declared keys, mypy checks the keys and values producers write and readers
read, and the controller's check requires what the declarations say it reads and checks each
declared key's value against its type."""

from __future__ import annotations

from collections import defaultdict
from types import UnionType
from typing import Union, get_args, get_origin

import pytest
from typing_extensions import get_type_hints, is_typeddict

from srl.config.load import load_config
from srl.launch.monitor import RunMonitor
from srl.launch.observers import ObservedReport
from srl.launch.reports import FIELDS, declared_types, payload_problem
from srl.launch.run import run_experiment
from srl.streams.control import Kind, Role
from srl.streams.reports import (
    FAILED,
    LANE_EPISODES,
    MEMBER_EVAL,
    POLICY_EVAL,
    REPORT_TYPES,
    REPORTS,
    SHELL,
    ActorReport,
    ErrorReport,
    Key,
    PodReport,
    ShellReport,
    TrainsReport,
)

STEPS = ["stop.total_env_steps=1500", "stop.target_return=null", "monitor.display=off", "monitor.learning_curve=false"]


def test_every_key_is_spelled_once():
    keys = {name: value for name, value in vars(Key).items() if name.isupper()}
    assert len(set(keys.values())) == len(keys), "two names for one key"
    declared = set().union(*(d.keys for d in REPORTS.values()), LANE_EPISODES, MEMBER_EVAL, POLICY_EVAL)
    assert declared == set(keys.values()), f"keys no role sends: {set(keys.values()) - declared}"


def test_the_check_reads_only_declared_keys_and_requires_what_each_role_declares():
    every = set().union(*(d.keys for d in REPORTS.values()))
    assert set(FIELDS) <= every, f"checked but sent by no role: {set(FIELDS) - every}"
    lists = {Key.EPISODE_RETURNS, Key.EPISODE_LENGTHS, Key.EVAL_EPISODE_RETURNS}
    for role, declared in REPORTS.items():
        complete = {k: [] if k in lists else 0 for k in declared.required}
        assert payload_problem(Kind.REPORT, role, complete) is None, role
        for missing in declared.required:
            partial = {k: v for k, v in complete.items() if k != missing}
            assert payload_problem(Kind.REPORT, role, partial) == f"a {role.title} report without {missing}"
        assert payload_problem(Kind.ERROR, role, {Key.TRACEBACK: "..."}) is None  # an error report: none of them


def _undeclared(role: Role, payload: dict) -> set[str]:
    """Keys of a report that its role does not declare (an algorithm's stats, with a "/", aside)."""
    if REPORTS[role].open:
        return set()
    out = {k for k in payload if k not in REPORTS[role].keys and "/" not in k}
    for entry in payload.get(Key.POLICIES, {}).values():
        out |= set(entry) - set(LANE_EPISODES)
    for entry in payload.get(Key.EVAL_POLICIES, {}).values():
        out |= set(entry) - set(POLICY_EVAL)
    for entry in payload.get(Key.EVALS, []):
        out |= set(entry) - set(MEMBER_EVAL)
    return out


@pytest.mark.parametrize("experiment,overrides", [
    ("cartpole-ppo", ["launch.launcher=local", "dataflow.inference=policy_worker", "launch.num_actor_workers=2",
                      "eval.episodes=1", "eval.interval_s=0.2", "dataflow.param_relay=per_host"]),
    ("cartpole-dqn", ["launch.launcher=inline", "replay.warmup=64", "replay.batch_size=32"]),
    ("cartpole-pod", ["launch.launcher=inline"]),
    ("cartpole-pod-ensemble", ["launch.launcher=inline", "pod.ensemble.population=2", "dataflow.envs_per_actor=16",
                               "pod.ensemble.eval_interval_updates=1", "pod.ensemble.eval_episodes=1"]),
    ("mpe-tag", ["launch.launcher=inline", "dataflow.envs_per_actor=4", "eval.episodes=1", "eval.interval_s=0.2"]),
], ids=["policy-workers-local", "replay", "pod", "ensemble", "two-policies"])  # fmt: skip
def test_every_report_a_run_sends_holds_only_its_roles_declared_keys(experiment, overrides, run_dir, monkeypatch):
    seen: dict[Role, set[str]] = defaultdict(set)
    undeclared: dict[str, set[str]] = {}
    on_report = RunMonitor.on_report

    def watched(self, role, index, payload, final=False):
        seen[role] |= set(payload)
        if bad := _undeclared(role, payload):
            undeclared[f"{role.title}:{index}"] = bad
        return on_report(self, role, index, payload, final)

    monkeypatch.setattr(RunMonitor, "on_report", watched)
    assert run_experiment(load_config(experiment, [*STEPS, *overrides, f"run.run_dir={run_dir}"])) == 0
    assert not undeclared, f"report keys no declaration names: {undeclared}"
    for role, keys in seen.items():
        assert set(REPORTS[role].required) <= keys, role


# Each role's keys as declared before the report types (main at d4cf288): REPORTS, made from the
# TypedDicts now, must say the same. (required, optional)
TODAY = {
    Role.ACTOR: ({"env_steps", "episode_returns", "episode_lengths"},
                 {"episodes", "env_time_s", "nonfinite_episodes_skipped", "episode_info", "segments_lost",
                  "lock_step_segments_sent", "policies"}),
    Role.POLICY: (set(), {"rows", "batches", "infer_time_s", "policy_version"}),
    Role.TRAINER: ({"segments_dropped", "updates"},
                   {"policy_version", "trained_env_steps", "policy_lag_mean", "train_time_s", "nonfinite_updates_skipped",
                    "params_sha256", "stop_reason", "stop_kind", "segments_lost", "segments_pending"}),
    Role.PARAMS: (set(), {"params_version", "publishes"}),
    Role.POD: ({"env_steps", "episode_returns", "episode_lengths", "segments_dropped", "updates"},
               {"episodes", "env_time_s", "nonfinite_episodes_skipped", "episode_info", "policy_version",
                "trained_env_steps", "policy_lag_mean", "train_time_s", "nonfinite_updates_skipped", "params_sha256",
                "stop_reason", "stop_kind", "infer_time_s", "member", "adoptions", "hparams", "evals"}),
    Role.BUFFER: (set(), {"replay_size", "replay_inserted", "segments_stored", "batches_served", "priority_updates",
                          "buffer_time_s", "segments_lost"}),
    Role.EVAL: ({"eval_episode_returns", "eval_policy_version"}, {"eval_time_s", "eval_policies"}),
    Role.CUSTOM: (set(), set()),
    Role.RELAY: (set(), {"params_version", "publishes", "wants_upstream"}),
}  # fmt: skip


def test_the_report_types_declare_the_keys_of_before():
    assert set(REPORTS) == set(TODAY)
    for role, (required, optional) in TODAY.items():
        declared = REPORTS[role]
        assert (set(declared.required), set(declared.optional)) == (required, optional), role
        assert len(declared.required) == len(required) and len(declared.optional) == len(optional), role
    assert REPORTS[Role.CUSTOM].open and not any(d.open for r, d in REPORTS.items() if r != Role.CUSTOM)
    assert SHELL == ("time_breakdown", "rejected_messages", "dropped_messages")
    assert FAILED == ("traceback", "halt", "write_failed")
    assert set(LANE_EPISODES) == {"episodes", "episode_returns", "episode_lengths", "results"}
    assert set(MEMBER_EVAL) == {"member", "env_steps", "eval_return", "hparams", "state", "adoptions"}
    assert set(POLICY_EVAL) == {"episode_returns", "policy_version"}


def test_every_declared_key_has_a_value_check_and_every_check_a_declared_key():
    declared = set().union(*(d.keys for d in REPORTS.values()))
    assert set(FIELDS) == declared, f"unchecked: {declared - set(FIELDS)}, undeclared: {set(FIELDS) - declared}"


def test_a_key_has_one_type_in_every_report_that_holds_it():
    types: dict[str, set] = defaultdict(set)
    for report in (ShellReport, ErrorReport, *REPORT_TYPES.values()):
        for key, value_type in get_type_hints(report).items():
            types[key].add(value_type)
    assert {key: ts for key, ts in types.items() if len(ts) > 1} == {}


def _sample(value_type):
    """A value of `value_type` (a report field's declared type) as JSON brings it."""
    origin, args = get_origin(value_type), get_args(value_type)
    if origin in (Union, UnionType):
        return _sample(next(a for a in args if a is not type(None)))
    if origin is list:
        return [_sample(args[0])]
    if origin is dict:
        return {"k": _sample(args[1])}
    if is_typeddict(value_type):
        return {key: _sample(t) for key, t in get_type_hints(value_type).items()}
    return {int: 1, float: 0.5, str: "x", bytes: b"x"}[value_type]


# where the controller needs more than the type: a value that also holds that
SAMPLES = {Key.STOP_KIND: "target_return", Key.WRITE_FAILED: [28, "No space left on device", "run/x"],
           Key.POLICIES: {"p": {Key.EPISODES: 1, Key.EPISODE_RETURNS: [0.5], Key.EPISODE_LENGTHS: [1],
                                Key.RESULTS: {"3": [1, 0, 0]}}}}  # fmt: skip


def test_each_fields_check_takes_a_value_of_its_declared_type_and_refuses_another():
    for key, value_type in declared_types().items():
        value = SAMPLES.get(key, _sample(value_type))
        assert FIELDS[key](value), (key, value_type, value)
        assert not FIELDS[key]({"k": [None]}), key  # of no declared type
    assert not FIELDS[Key.ROWS](1.5) and not FIELDS[Key.PARAMS_SHA256](3) and not FIELDS[Key.HPARAMS]({"lr": "x"})


def test_an_observer_reads_a_report_only_as_its_roles_type():
    observed = ObservedReport(Role.POD, 0, {Key.UPDATES: 1}, "", True, 10)
    assert observed.as_type(TrainsReport)[Key.UPDATES] == 1 and observed.as_type(PodReport) is observed.payload
    with pytest.raises(TypeError, match="a pod report read as a ActorReport"):
        observed.as_type(ActorReport)


PRODUCER = '''
from srl.streams.reports import ActorReport, Key, TrainerReport


def report(steps: int) -> ActorReport:
    return {Key.ENV_STEPS: steps, Key.EPISODE_RETURNS: [], Key.EPISODE_LENGTHS: []WRONG}


def read(report: TrainerReport) -> int:
    return report[Key.UPDATES]READ
'''


@pytest.mark.parametrize("wrong,read,error", [
    ("", "", None),
    (', "env_step": 1', "", 'Extra key "env_step" for TypedDict "ActorReport"'),
    (", Key.EVAL_TIME_S: 1.0", "", 'Extra key "eval_time_s" for TypedDict "ActorReport"'),
    (', Key.EPISODES: "3"', "", 'TypedDict item "episodes" has type "int"'),
    ("", " + report[Key.ENV_STEPS]", 'TypedDict "TrainerReport" has no key "env_steps"'),
], ids=["right", "misspelled", "another-roles", "wrong-type", "read-of-another-role"])  # fmt: skip
def test_mypy_checks_the_keys_and_values_a_producer_writes_and_a_reader_reads(wrong, read, error, tmp_path):
    from mypy import api

    probe = tmp_path / "probe.py"
    probe.write_text(PRODUCER.replace("WRONG", wrong).replace("READ", read))
    out, err, status = api.run([str(probe), "--no-incremental", "--follow-imports=silent", "--python-version=3.10",
                                "--config-file=", "--cache-dir=" + str(tmp_path / "cache")])
    if error is None:
        assert status == 0, out + err
    else:
        assert status == 1 and error in out, out + err


def test_a_field_only_copied_into_the_metrics_is_checked_against_its_type_too():
    assert payload_problem(Kind.REPORT, Role.POLICY, {Key.ROWS: 8, Key.BATCHES: 1}) is None
    assert payload_problem(Kind.REPORT, Role.POLICY, {Key.ROWS: "8"}) == "report fields of the wrong type or out of bounds: rows"
    bad_lag = {Key.SEGMENTS_DROPPED: 0, Key.UPDATES: 1, Key.POLICY_LAG_MEAN: [1.0]}
    assert payload_problem(Kind.REPORT, Role.TRAINER, bad_lag) == "report fields of the wrong type or out of bounds: policy_lag_mean"


def test_a_stop_kind_that_is_no_text_is_refused_not_raised():
    """Checked by `in` a set of the kinds: a list raised TypeError in the controller's inbox (only
    Malformed is dropped and counted), ending the run."""
    report = {Key.SEGMENTS_DROPPED: 0, Key.UPDATES: 1, Key.STOP_REASON: "x", Key.STOP_KIND: ["target_return"]}
    assert payload_problem(Kind.REPORT, Role.TRAINER, report) == "report fields of the wrong type or out of bounds: stop_kind"
