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

import numpy as np
import pytest
import yaml

import srl

DOC = Path(__file__).parent.parent / "docs" / "custom.md"
RUN_DIR_PLACEHOLDER = "runs/sign-a2c-<date>-<time>"


def doc_module_code() -> str:
    """The page's Python blocks, one after the other: the whole of `my_rl.py`."""
    return "\n\n".join(re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S))


def doc_sections(*titles: str) -> str:
    """The page's sections (`## N. Title`) whose titles contain one of `titles`; none given: all."""
    sections = DOC.read_text().split("\n## ")
    return "\n## ".join(s for s in sections if not titles or any(t in s.partition("\n")[0] for t in titles))


def doc_commands(*sections: str) -> list[list[str]]:
    """Every line of the bash blocks of `sections`, split as a shell would, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", doc_sections(*sections), flags=re.S)
    return [shlex.split(line, comments=True) for block in blocks for line in block.splitlines() if line.strip()]


def write_doc_files(*sections: str, into: Path) -> list[str]:
    """The YAML blocks of `sections`, each saved under the name its first line gives (`# name.yaml`)."""
    names = []
    for block in re.findall(r"```yaml\n(.*?)```", doc_sections(*sections), flags=re.S):
        name = re.fullmatch(r"# (\S+\.yaml)", block.splitlines()[0])
        assert name, f"a YAML block of docs/custom.md does not start with '# NAME.yaml':\n{block}"
        (into / name[1]).write_text(block)
        names.append(name[1])
    return names


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
    commands = doc_commands("The environment", "The algorithm", "The experiment", "Run it")
    assert [argv[:2] for argv in commands] == [["srl", "run"], ["srl", "graph"], ["srl", "list"], ["srl", "eval"],
                                               ["srl", "eval"]]  # fmt: skip
    run, graph, listing, evaluate, against = commands

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
    assert against[-2:] == ["--against", "random"], against
    against = [os.path.relpath(run_dir, tmp_path) if arg == RUN_DIR_PLACEHOLDER else arg for arg in against]
    beside = json.loads(run_srl(against, tmp_path).stdout)
    assert beside["return_mean"] >= 9.0 and beside["random_return_mean"] < beside["return_mean"] - 2, beside


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


def test_experiment_files_and_wrappers_run_as_written(tmp_path):
    """The experiment-file and wrapper sections: the YAML files as shown, the commands as written, in an empty directory."""
    assert write_doc_files("Experiment files", "wrappers", into=tmp_path) == ["mpe-reference.yaml", "doorkey.yaml"]
    graph, run, rerun = doc_commands("Experiment files")
    assert graph == ["srl", "graph", "mpe-reference.yaml"], graph
    described = run_srl(graph, tmp_path).stdout
    assert "agents=['agent_0', 'agent_1']" in described and "action Discrete(50)" in described, described

    run_srl(run, tmp_path)
    [run_dir] = glob.glob(str(tmp_path / "runs" / "mpe-reference-*"))  # named after the file
    saved = yaml.safe_load((Path(run_dir) / "config.yaml").read_text())
    assert saved["env_kwargs"] == {"module": "mpe2.simple_reference_v3", "max_cycles": 25}  # replaced whole
    assert saved["algo"]["lr"] == 1e-3 and saved["algo"]["epochs"] == 10  # merged into mpe-mappo's
    assert saved["stop"]["total_env_steps"] == 2000 and saved["launch"]["launcher"] == "inline"  # the command line last

    placeholder = "runs/mpe-reference-<date>-<time>/config.yaml"
    assert rerun == ["srl", "run", placeholder], rerun
    run_srl(["srl", "run", os.path.relpath(Path(run_dir) / "config.yaml", tmp_path)], tmp_path)
    first, again = sorted(glob.glob(str(tmp_path / "runs" / "mpe-reference-*")))
    redone = yaml.safe_load((Path(again) / "config.yaml").read_text())
    differ = {k for k in saved if saved[k] != redone[k]} | {k for k in saved["run"] if saved["run"][k] != redone["run"][k]}
    assert differ == {"run", "run_dir", "run_id"}, differ  # the same experiment, as a new run

    doorkey, short = doc_commands("wrappers")
    described = run_srl(doorkey, tmp_path).stdout
    assert "env MiniGrid-DoorKey-5x5-v0" in described and "observation Box(0, 255, (7, 7, 3), uint8)" in described
    run_srl(short, tmp_path)
    [cut] = glob.glob(str(tmp_path / "runs" / "cartpole-ppo-*"))
    lengths = [json.loads(line).get("episode_length_mean") for line in Path(cut, "metrics.jsonl").read_text().splitlines()]
    assert max(n for n in lengths if n is not None) <= 10, lengths  # cut at 10 steps (random play lasts ~20)


def test_the_dict_observation_section_learns_as_written(tmp_path):
    """The Dict-observation section: an env with an image key and a flag key, learned by PPO's multi-input policy
    (random play scores 2.5, reading the image alone 5)."""
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    [run] = [argv for argv in doc_commands() if "lit-quadrant-ppo" in argv]
    run_srl(run, tmp_path)
    [run_dir] = glob.glob(str(tmp_path / "runs" / "lit-quadrant-ppo-*"))
    summary = json.loads((Path(run_dir) / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= 8.5, summary


def test_the_worker_of_your_own_runs_as_written_on_local_and_tcp(tmp_path):
    """The extra-worker section: the reward-stats worker placed beside the built-in ones, on shared
    memory and over tcp, writing one line per segment the trainer took (the sign game pays 0 or 1)."""
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    graph, *runs = doc_commands("A worker of your own")
    described = run_srl(graph, tmp_path).stdout
    assert "custom:0 (reward-stats)" in described and "stream trainer.samples.tap: trainer:0 -> custom:0" in described
    assert [argv[:2] for argv in runs] == [["srl", "run"]] * 2 and "dataflow.transport=tcp" in runs[1], runs
    for run in runs:
        before = set(glob.glob(str(tmp_path / "runs" / "sign-a2c-*")))
        run_srl(run, tmp_path)
        [run_dir] = set(glob.glob(str(tmp_path / "runs" / "sign-a2c-*"))) - before
        means = [float(line) for line in (Path(run_dir) / "reward_stats_0.csv").read_text().splitlines()]
        # 10k env steps are 250 segments of 10 steps x 4 envs; a copy may be missed, not many
        assert len(means) >= 100 and all(0 <= m <= 1 for m in means), (run, len(means), means[:5])
        assert np.mean(means[-50:]) > np.mean(means[:50]) + 0.1, (run, means)  # A2C learns the game
