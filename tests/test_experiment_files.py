"""Experiment files: `srl run FILE.yaml [key=value ...]` = the file's `base` experiment, the file's
keys over it (merged, replaced whole with !replace, reset with null), then the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import srl
from srl.config import ConfigError
from srl.config.load import load_config
from srl.graph import build_graph
from srl.launch.outputs import RunOutputs

REFERENCE = """\
base: mpe-mappo
env_kwargs: !replace {module: mpe2.simple_reference_v3, max_cycles: 25}
algo: {lr: 1.0e-3}
algo.epochs: 4
seed: 5
"""


def write(tmp_path: Path, text: str, name: str = "exp.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def srl_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "srl"
    env = {**os.environ, "PYTHONPATH": str(Path(srl.__file__).resolve().parent.parent)}
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=env)


def test_base_then_the_file_then_the_command_line(tmp_path):
    config = load_config(write(tmp_path, REFERENCE, "mpe-reference.yaml"), ["run.seed=7", "algo.gamma=0.9"])
    assert config.env == "pettingzoo-mappo" and config.policy == "mappo"  # from the base
    assert config.env_kwargs == {"module": "mpe2.simple_reference_v3", "max_cycles": 25}  # whole: no N
    assert (config.algo.lr, config.algo.epochs, config.algo.entropy_coef) == (1e-3, 4, 0.01)  # merged
    assert (config.run.seed, config.algo.gamma) == (7, 0.9)  # the command line goes last
    assert config.experiment == "mpe-reference" and Path(config.run.run_dir).name.startswith("mpe-reference-")
    graph = build_graph(config)
    assert graph.agents == ("agent_0", "agent_1") and graph.action_space.n == 50  # simple_reference's


def test_merging_env_kwargs_would_keep_the_bases_and_fail(tmp_path):
    """Why !replace: a merged env_kwargs keeps simple_spread's N, which simple_reference refuses."""
    merged = load_config(write(tmp_path, REFERENCE.replace("!replace ", "")))
    assert merged.env_kwargs["N"] == 3 and merged.env_kwargs["module"] == "mpe2.simple_reference_v3"
    with pytest.raises(ConfigError, match="unexpected keyword argument 'N'"):
        build_graph(merged)


def test_null_resets_to_the_default_and_replace_null_is_none(tmp_path):
    text = "base: cartpole-ppo\nmax_policy_lag: null\ntarget_return: !replace null\ndisplay: off\n"
    config = load_config(write(tmp_path, text))
    assert load_config("cartpole-ppo").dataflow.max_policy_lag == 5 and config.dataflow.max_policy_lag == 2  # the field's default
    assert config.stop.target_return is None
    assert config.monitor.display == "off"  # a string, as display=off is on the command line
    inner = load_config(write(tmp_path, "base: mpe-mappo\nenv_kwargs: {N: null, local_ratio: !replace null}\n"))
    assert "N" not in inner.env_kwargs and inner.env_kwargs["local_ratio"] is None  # dropped, and None itself
    assert inner.env_kwargs["max_cycles"] == 25  # the rest merged


def test_without_a_base_the_plain_defaults(tmp_path):
    config = load_config(write(tmp_path, "total_env_steps: 1000\n", "plain.yaml"))
    assert (config.env, config.algorithm, config.stop.total_env_steps, config.experiment) == (
        "CartPole-v1", "ppo", 1000, "plain")
    assert load_config(write(tmp_path, "", "empty.yaml")).env == "CartPole-v1"


def test_a_new_algorithm_in_the_file_drops_the_bases_algo_settings(tmp_path):
    config = load_config(write(tmp_path, "base: cartpole-ppo\nalgorithm: appo\n"))
    assert config.algorithm == "appo"
    assert config.algo.lr == type(config.algo)().lr  # APPO's default, not cartpole-ppo's PPO lr


def test_modules_in_the_file_register_the_base(tmp_path, monkeypatch):
    (tmp_path / "file_experiments_probe.py").write_text(
        "from srl.api import register_experiment\n\n"
        "@register_experiment('probe-from-a-module')\n"
        "def probe():\n    return {'env': 'Acrobot-v1', 'seed': 11}\n"
    )
    monkeypatch.chdir(tmp_path)  # modules are looked for here last, as with modules= on the command line
    config = load_config(write(tmp_path, "modules: [file_experiments_probe]\nbase: probe-from-a-module\n"))
    assert (config.env, config.run.seed, config.modules) == ("Acrobot-v1", 11, ["file_experiments_probe"])


def test_a_runs_saved_config_runs_again_as_a_new_run(tmp_path):
    for name in ("cartpole-ppo", "mpe-mappo", "cartpole-dqn", "pendulum-sac"):
        first = load_config(name, [f"run.run_dir={tmp_path / name}", "run.run_id=abc123"])
        RunOutputs(first, started_s=0.0)  # writes config.yaml, as a run does
        again = load_config(str(tmp_path / name / "config.yaml"))
        a, b = first.model_dump(), again.model_dump()
        differ = {k for k in a if a[k] != b[k]} | {k for k in a["run"] if a["run"][k] != b["run"][k]}
        assert differ == {"run", "run_dir", "run_id"}, name
        assert again.run.run_id is None and Path(again.run.run_dir).name.startswith(f"{name}-"), again.run.run_dir

    saved = yaml.safe_load((tmp_path / "cartpole-ppo" / "config.yaml").read_text())
    saved["run"]["resume"], saved["env_kwargs"] = str(tmp_path / "cartpole-ppo"), {"render_mode": None}
    path = write(tmp_path, yaml.safe_dump(saved), "resumed.yaml")
    again = load_config(path)
    assert again.run.resume is None  # the run it resumed is not resumed again
    assert again.env_kwargs == {"render_mode": None}  # a saved null is None, not "the default"


def test_unknown_keys_name_the_file(tmp_path):
    path = write(tmp_path, "base: cartpole-ppo\nsed: 3\nalgo: {lrr: 1}\nreplay.capacityy: 4\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value)
    assert message.startswith(f"{path}: invalid config: unknown field 'sed' (in a section: run.seed?); "
                              "allowed fields: base, experiment, ")
    assert "unknown field 'algo.lrr'; allowed fields: lr, " in message
    assert "unknown field 'replay.capacityy'; allowed fields: capacity, " in message


@pytest.mark.parametrize("text, problem", [
    ("- a\n- b\n", "an experiment file is a YAML mapping of config keys, got list"),
    ("seed: [1\n", "not a readable YAML file"),
    ("base: no-such-experiment\n", "base: unknown"),
    ("base: [cartpole-ppo]\n", "'base' names a built-in or registered experiment"),
    ("algo: !replace {lr: !replace 3}\n", "algo: !replace inside a value that is set whole means nothing"),
])
def test_a_bad_file_is_one_error_naming_it(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value).startswith(f"{path}: ") and problem in str(error.value), error.value
    with pytest.raises(ConfigError, match=r"no experiment file '.*nope\.yaml'"):
        load_config(str(tmp_path / "nope.yaml"))


def test_srl_run_a_file_with_the_console_script(tmp_path):
    write(tmp_path, "base: cartpole-ppo\nlauncher: inline\ntotal_env_steps: 1500\ntarget_return: null\n"
                    "algo: {epochs: 2}\n", "short.yaml")
    proc = srl_cli("run", "short.yaml", "run.seed=3", "monitor.display=off", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [run_dir] = (tmp_path / "runs").glob("short-*")
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert (saved["run"]["seed"], saved["algo"]["epochs"], saved["launch"]["launcher"]) == (3, 2, "inline")
    assert saved["experiment"] == "short" and saved["algo"]["lr"] == 1e-3  # cartpole-ppo's, merged
    assert (run_dir / "summary.json").is_file()

    graph = srl_cli("graph", "short.yaml", cwd=tmp_path)
    assert graph.returncode == 0 and graph.stdout.startswith("experiment short: env CartPole-v1"), graph

    write(tmp_path, "base: cartpole-ppo\ntotal_env_step: 5\n", "typo.yaml")
    bad = srl_cli("run", "typo.yaml", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stdout == ""
    [line] = bad.stderr.splitlines()
    assert line.startswith("srl: typo.yaml: invalid config: unknown field 'total_env_step' "
                           "(in a section: stop.total_env_steps?); allowed fields: "), line
    assert not list((tmp_path / "runs").glob("typo-*"))  # refused before the run dir
