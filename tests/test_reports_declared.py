"""Each role's report is declared once (srl.streams.reports): what its kernels send holds only
declared keys, and the controller's check requires what the declarations say it reads."""

from __future__ import annotations

from collections import defaultdict

import pytest

from srl.config.load import load_config
from srl.launch.monitor import RunMonitor
from srl.launch.reports import FIELDS, payload_problem
from srl.launch.run import run_experiment
from srl.streams.control import Kind, Role
from srl.streams.reports import LANE_EPISODES, MEMBER_EVAL, POLICY_EVAL, REPORTS, Key

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
