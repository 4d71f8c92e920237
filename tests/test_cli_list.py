"""`srl list [modules=...]`: each experiment with its env and algorithm, the user's own modules
imported first (from the current directory too), and the other registries by their plural."""

from __future__ import annotations

import subprocess
import sys

import pytest

from srl.cli import main


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """An empty current directory; sys.path (which gets it appended) is put back afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    return tmp_path


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_builtin_experiments_show_their_env_and_algorithm(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    table = rows(out)
    assert table[0] == ["experiment", "env", "algorithm"]
    assert ["cartpole-ppo", "CartPole-v1", "ppo"] in table
    assert ["pendulum-sac", "Pendulum-v1", "sac"] in table
    assert ["cartpole-dqn", "CartPole-v1", "dqn"] in table
    assert "\npolicies: " in out and "policys" not in out
    assert "\nalgorithms: " in out and "\nenvironments: " in out


def test_modules_from_the_current_directory_are_listed(user_dir, capsys):
    (user_dir / "list_mod_a.py").write_text(
        "from srl.api import register_experiment\n\n"
        "register_experiment('listed-a')(lambda: {'env': 'Acrobot-v1', 'algorithm': 'sac'})\n"
    )
    # an experiment that leaves env and algorithm to the config's defaults
    (user_dir / "list_mod_b.py").write_text(
        "from srl.api import register_experiment\n\nregister_experiment('listed-b')(lambda: {'seed': 4})\n"
    )
    assert main(["list", "modules=list_mod_a,list_mod_b"]) == 0
    table = rows(capsys.readouterr().out)
    assert ["listed-a", "Acrobot-v1", "sac"] in table
    assert ["listed-b", "CartPole-v1", "ppo"] in table


def test_a_missing_module_or_another_key_is_one_line(user_dir, capsys):
    assert main(["list", "modules=list_mod_nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("srl: field 'modules': no module named 'list_mod_nowhere'; looked in "), err
    assert str(user_dir) in err and len(err.splitlines()) == 1
    assert main(["list", "run.seed=3"]) == 2
    assert capsys.readouterr().err == "srl: 'list' takes only modules=... (got run.seed=3)\n"


def _list_in_a_fresh_process(*args: str) -> str:
    """`srl list ARGS` in a new interpreter (this one has srl.testing loaded by conftest), with a
    line saying whether the counting envs' Gymnasium ids are registered after it."""
    code = (
        "import sys, gymnasium\nfrom srl.cli import main\n"
        f"code = main(['list', *{list(args)!r}])\n"
        "print('gymnasium ids:', sorted(i for i in gymnasium.envs.registry if i.startswith('srl/')))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return done.stdout


def test_test_doubles_are_listed_only_with_modules_srl_testing():
    plain = _list_in_a_fresh_process()
    envs = next(line for line in plain.splitlines() if line.startswith("environments: "))
    assert "gymnasium" in envs and "counting" not in envs
    assert "gymnasium ids: []" in plain
    loaded = _list_in_a_fresh_process("modules=srl.testing")
    envs = next(line for line in loaded.splitlines() if line.startswith("environments: "))
    assert "counting" in envs.removeprefix("environments: ").split(", ")
    assert "gymnasium ids: ['srl/Counting-v0', 'srl/CountingVector-v0']" in loaded
