"""Deterministic mode: same seed, bit-identical parameters, whatever the process timing.

Every worker sleeps a random (unseeded) time before each poll, so the two runs interleave
differently; the hashes must still match, and must match the one-process (inline) run too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

COMMON = ["seed=7", "num_actor_workers=2", "max_updates=12", "display=off", "target_return=null"]


def params_hash(run_dir, *overrides: str, jitter_s: float = 0.004) -> str:
    env = {**os.environ, "SRL_TEST_JITTER_MAX_S": str(jitter_s)}
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", *COMMON, *overrides, f"run_dir={run_dir}"],
        capture_output=True, text=True, timeout=180, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] == 12 and summary["policy_version"] == 12, summary
    return summary["params_sha256"]


@pytest.mark.parametrize(
    "workers",
    [["inference=inline"], ["inference=policy_worker", "num_policy_workers=2", "ring_splits=2"]],
    ids=["inline-inference", "two-policy-workers"],
)
def test_two_deterministic_runs_give_identical_parameters(tmp_path, workers):
    first = params_hash(tmp_path / "a", "deterministic=true", *workers)
    second = params_hash(tmp_path / "b", "deterministic=true", *workers)
    assert first == second
    inline = params_hash(tmp_path / "c", "deterministic=true", "launcher=inline", *workers, jitter_s=0)
    assert inline == first, "the one-process run computes the same parameters"


def test_without_deterministic_mode_timing_changes_the_result(tmp_path):
    """The control: proves the comparison above can fail."""
    workers = ["inference=policy_worker", "num_policy_workers=2", "ring_splits=2"]
    hashes = {params_hash(tmp_path / f"r{i}", *workers, jitter_s=0.004) for i in range(2)}
    assert len(hashes) == 2
