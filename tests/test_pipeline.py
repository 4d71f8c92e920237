"""The dataflow end to end with counting envs: no sample lost or duplicated, on every launcher."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import recording  # noqa: F401  (registers the "record" algorithm)

from srl.config.checks import build_config
from srl.launch.run import run_experiment
from srl.testing import check_counts

EPISODE_LENGTH = 7


def counting_config(launcher: str, run_dir: Path, **overrides):
    values = {
        "experiment": "counting",
        "env": "counting",
        "env_kwargs": {"episode_length": EPISODE_LENGTH},
        "algorithm": "record",
        "algo": {"out_dir": str(run_dir / "batches")},
        "launcher": launcher,
        "num_actor_workers": 2,
        "envs_per_actor": 4,
        "ring_splits": 2,
        "sample_length": 5,
        "batch_segments": 3,
        "max_policy_lag": 10**6,
        "total_env_steps": 4000,
        "run_dir": str(run_dir),
        "display": "off",
        **overrides,
    }
    return build_config(values)


@pytest.mark.parametrize(
    "launcher,extra",
    [
        ("inline", {}),
        ("inline", {"inference": "inline"}),
        ("local", {}),
        ("local", {"num_policy_workers": 2}),
        ("local", {"inference": "inline"}),
        ("local", {"transport": "tcp"}),
        ("local", {"transport": "tcp", "inference": "inline"}),
    ],
)
def test_every_transition_reaches_the_trainer_exactly_once(launcher, extra, run_dir):
    from recording import load_batches

    config = counting_config(launcher, run_dir, **extra)
    assert run_experiment(config) == 0
    batches = load_batches(run_dir / "batches")
    assert batches, "the trainer got no batch"
    totals = check_counts([b["obs"] for b in batches], [b["terminated"] for b in batches], EPISODE_LENGTH)
    assert totals["envs"] == 2 * 4, totals
    assert totals["transitions"] >= 2000, totals
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None
    assert summary["env_steps"] >= 4000
    # each finished counting episode returns exactly EPISODE_LENGTH
    assert summary["episode_return_mean"] == pytest.approx(EPISODE_LENGTH)


def test_samples_carry_the_policy_version_that_acted(run_dir):
    from recording import load_batches

    assert run_experiment(counting_config("inline", run_dir)) == 0
    batches = load_batches(run_dir / "batches")
    for update, batch in enumerate(batches):
        versions = batch["policy_version"][:-1]
        assert versions.min() >= 0 and versions.max() <= update, (update, versions.min(), versions.max())
    assert batches[-1]["policy_version"].max() > 0, "no sample was ever acted by an updated policy"
