"""Restart policy kernel: restarts counted per worker in a sliding window; one more is a crash loop."""

from __future__ import annotations

import pytest

from srl.launch.restarts import CrashLoop, RestartPolicy


def test_restarts_within_the_window_until_the_limit_then_a_crash_loop():
    policy = RestartPolicy(max_restarts=2, window_s=10)
    assert policy.on_failure("actor:0", 0.0) == 1
    assert policy.on_failure("actor:0", 5.0) == 2
    with pytest.raises(CrashLoop, match=r"restarted 2 times within 10 s .*max_restarts=2"):
        policy.on_failure("actor:0", 9.9)


def test_old_restarts_leave_the_window():
    policy = RestartPolicy(max_restarts=2, window_s=10)
    policy.on_failure("actor:0", 0.0)
    policy.on_failure("actor:0", 5.0)
    assert policy.on_failure("actor:0", 10.0) == 3  # the first one is 10 s old: out of the window
    with pytest.raises(CrashLoop):
        policy.on_failure("actor:0", 14.0)
    assert policy.on_failure("actor:0", 15.0) == 4


def test_workers_are_counted_apart():
    policy = RestartPolicy(max_restarts=1, window_s=60)
    assert policy.on_failure("actor:0", 0.0) == 1
    assert policy.on_failure("actor:1", 0.0) == 1
    assert policy.on_failure("policy:0", 1.0) == 1
    with pytest.raises(CrashLoop):
        policy.on_failure("actor:1", 2.0)
    assert policy.total == {"actor:0": 1, "actor:1": 1, "policy:0": 1}


def test_zero_restarts_makes_every_failure_final():
    with pytest.raises(CrashLoop, match="max_restarts=0"):
        RestartPolicy(max_restarts=0, window_s=60).on_failure("trainer:0", 0.0)


@pytest.mark.parametrize("bad", [(-1, 60.0), (3, 0.0)])
def test_bad_limits_are_refused(bad):
    with pytest.raises(ValueError):
        RestartPolicy(*bad)
