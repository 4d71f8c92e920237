"""docs/custom.md's code, extracted verbatim, trains in the multi-process (local) mode."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).parent.parent / "docs" / "custom.md"


def write_module(tmp_path: Path) -> dict[str, str]:
    """my_rl.py from the doc's code blocks; the environment that imports it."""
    code = "\n\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S))
    (tmp_path / "my_rl.py").write_text(code)
    # the checkout under test comes after the user's module, whatever srl is installed
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(DOC.parent.parent)])}


def test_custom_env_and_algorithm_walkthrough_runs_as_written(tmp_path):
    env = write_module(tmp_path)
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "sign-a2c", "modules=my_rl", f"run_dir={run_dir}", "seed=3"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary  # random play scores 5
    # the summary's mean also counts episodes reported after the stop, so it may sit just under 9.5
    assert summary["episode_return_mean"] >= 9.0


def test_the_documented_declaration_refuses_a_q_network(tmp_path):
    """The doc says `policy=q-mlp` is refused before launch: A2C declares policy_kind actor-critic."""
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "graph", "sign-a2c", "modules=my_rl", "policy=q-mlp"],
        capture_output=True, text=True, timeout=120, env=write_module(tmp_path), cwd=tmp_path,
    )
    assert proc.returncode == 2 and "algorithm 'a2c' needs a policy of kind actor-critic" in proc.stderr, proc.stderr
