"""The built-in pod experiments learn: pendulum-pod (continuous actions) and spread-pod (multi-agent)."""

from __future__ import annotations

from typing import Any

from srl.api import registry
from srl.config.load import load_config
from srl.testing.pod import pod_settings, train_pod


def pod_kwargs(experiment: str) -> dict[str, Any]:
    """The experiment's own settings (so the test runs what users run)."""
    return pod_settings(load_config(experiment, ["run.run_dir=/nonexistent"]))


def test_pendulum_pod_swings_up():
    """From about -1200 (random) to a mean-100 return of -300 within 500k env steps (seed 1 got
    there in ~240k and reaches -200 at ~410k)."""
    run = train_pod(total_env_steps=500_000, target_return=-300.0, seed=1, **pod_kwargs("pendulum-pod"))
    assert run.reached, run.summary()


def test_spread_pod_agents_learn_to_cover_landmarks():
    """Shared policy for 3 agents: the mean agent-episode return climbs from about -49 (random)
    to above -42 within 60k env steps."""
    run = train_pod(total_env_steps=60_000, seed=1, **pod_kwargs("spread-pod"))
    first = next(m for _, _, m in run.history if m is not None)
    assert first < -45 and run.return_mean > -42, (first, run.summary())
    assert "spread-pod" in registry.experiments.names()
