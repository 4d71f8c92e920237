"""docs/custom.md as a newcomer follows it: its code, extracted verbatim, saved as `my_rl.py` in an
empty directory, and its shell commands run there as written with the `srl` console script, which
(unlike `python -m`) does not put the current directory on sys.path."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import srl

DOC = Path(__file__).parent.parent / "docs" / "custom.md"
RUN_DIR_PLACEHOLDER = "runs/sign-a2c-<date>-<time>"


def doc_module_code() -> str:
    """The page's Python blocks, one after the other: the whole of `my_rl.py`."""
    return "\n\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S))


def doc_commands() -> list[list[str]]:
    """Every line of the page's bash blocks, split as a shell would, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), flags=re.S)
    return [shlex.split(line, comments=True) for block in blocks for line in block.splitlines() if line.strip()]


def srl_script() -> str:
    """The `srl` console script next to this Python (where pip installs it), else on PATH."""
    script = Path(sys.executable).parent / "srl"
    found = str(script) if script.is_file() else shutil.which("srl")
    if found is None:
        pytest.fail("no `srl` console script: install srl (pip install -e .)")
    return found


def srl_env() -> dict[str, str]:
    """The environment of the commands: PYTHONPATH names only the srl under test (a checkout, or
    where pip installed it), never the directory that holds the user's module."""
    return {**os.environ, "PYTHONPATH": str(Path(srl.__file__).resolve().parent.parent)}


def run_srl(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert argv[0] == "srl", argv
    proc = subprocess.run(
        [srl_script(), *argv[1:]], capture_output=True, text=True, timeout=300, env=srl_env(), cwd=cwd
    )
    assert proc.returncode == 0, f"{shlex.join(argv)} failed:\n{proc.stdout}{proc.stderr}"
    return proc


def test_custom_env_and_algorithm_walkthrough_runs_as_written(tmp_path):
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    commands = doc_commands()[:4]  # sections 1-4; later sections have their own tests
    assert [argv[:2] for argv in commands] == [["srl", "run"], ["srl", "graph"], ["srl", "list"], ["srl", "eval"]]
    run, graph, listing, evaluate = commands

    run_srl(run, tmp_path)
    [run_dir] = glob.glob(str(tmp_path / "runs" / "sign-a2c-*"))  # the default run_dir
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary  # random play scores 5
    # the summary's mean also counts episodes reported after the stop, so it may sit just under 9.5
    assert summary["episode_return_mean"] >= 9.0

    described = run_srl(graph, tmp_path).stdout
    for worker in ("actor:0", "actor:1", "policy:0", "trainer:0", "params:0"):
        assert worker in described, described

    listed = run_srl(listing, tmp_path).stdout.splitlines()
    assert ["sign-a2c", "sign-game", "a2c"] in [line.split() for line in listed], listed

    assert RUN_DIR_PLACEHOLDER in evaluate, evaluate
    evaluate = [os.path.relpath(run_dir, tmp_path) if arg == RUN_DIR_PLACEHOLDER else arg for arg in evaluate]
    result = json.loads(run_srl(evaluate, tmp_path).stdout)
    assert result["return_mean"] >= 9.0, result  # the trained policy, acting on its most likely action


def test_a_module_that_is_nowhere_is_one_line_naming_the_field_and_where_it_looked(tmp_path):
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    proc = subprocess.run(
        [srl_script(), "graph", "sign-a2c", "modules=my_rl_typo"],
        capture_output=True, text=True, timeout=120, env=srl_env(), cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("srl: field 'modules': no module named 'my_rl_typo'; looked in "), line
    assert str(tmp_path) in line  # the current directory is one of the places


def test_the_documented_declaration_refuses_a_q_network(tmp_path):
    """The doc says `policy=q-mlp` is refused before launch: A2C declares policy_kind actor-critic."""
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    proc = subprocess.run(
        [srl_script(), "graph", "sign-a2c", "modules=my_rl", "policy=q-mlp"],
        capture_output=True, text=True, timeout=120, env=srl_env(), cwd=tmp_path,
    )
    assert proc.returncode == 2 and "algorithm 'a2c' needs a policy of kind actor-critic" in proc.stderr, proc.stderr


def test_the_dict_observation_section_learns_as_written(tmp_path):
    """Section 5: an env with an image key and a flag key, learned by PPO's multi-input policy
    (random play scores 2.5, reading the image alone 5)."""
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    [run] = [argv for argv in doc_commands() if "lit-quadrant-ppo" in argv]
    run_srl(run, tmp_path)
    [run_dir] = glob.glob(str(tmp_path / "runs" / "lit-quadrant-ppo-*"))
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= 8.5, summary
