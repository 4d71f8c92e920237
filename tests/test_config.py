"""Bad config gets one clear error naming the field and what is allowed, before anything starts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import srl.config.overrides as config_module
from srl.config import RESET, ConfigError, Replace, parse_overrides
from srl.config.load import load_config
from srl.experiments.multiagent import SPREAD_KWARGS


def error_of(*overrides: str, experiment: str = "cartpole-ppo") -> str:
    with pytest.raises(ConfigError) as info:
        load_config(experiment, list(overrides))
    return str(info.value)


def test_unknown_key_names_it_and_lists_the_allowed_fields():
    message = error_of("num_actors=2")
    assert "unknown field 'num_actors'" in message and "num_actor_workers" in message


def test_old_flat_keys_are_read_as_their_sections_with_one_note(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(config_module, "_noted", set())
    old = {"seed": 4, "num_actor_workers": 2, "epsilon": 0.1, "ensemble.eval_episodes": 3, "pod": "false"}
    config = load_config("cartpole-dqn", [f"{key}={value}" for key, value in old.items()])
    assert config.run.seed == 4 and config.launch.num_actor_workers == 2 and not config.pod.enabled
    assert config.algo_config.epsilon == 0.1 and config.pod.ensemble.eval_episodes == 3
    notes = capsys.readouterr().err.splitlines()
    assert "note: config key 'seed' is now 'run.seed'; the old name still works" in notes and len(notes) == 5, notes
    load_config("cartpole-dqn", ["seed" + "=5"])  # the old key again
    assert capsys.readouterr().err == ""  # once per key
    flat = {"experiment": "old", "seed": 6, "total_env_steps": 777, "run_id": "r1", "launcher": "inline"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(flat))  # an older run's saved config
    resumed = load_config("ignored", [f"run.resume={tmp_path}"])
    assert (resumed.run.seed, resumed.stop.total_env_steps, resumed.run.run_id) == (6, 777, "r1")


def _both_names_refused(message: str, old: str, new: str) -> None:
    assert f"config keys {old!r} and {new!r} both set {new!r}" in message and "\n" not in message, message


@pytest.mark.parametrize("old, new", sorted(config_module.MOVED.items()))
def test_an_old_key_beside_its_new_name_in_the_overrides_is_refused_naming_both(old, new):
    """Either order: the old key used to win both ways, masking the user's new one with no word."""
    _both_names_refused(error_of(f"{old}=1", f"{new}=2"), old, new)
    _both_names_refused(error_of(f"{new}=2", f"{old}=1"), old, new)
    _both_names_refused(error_of(f"{old}=1", f"{new}=null"), old, new)  # a reset of the new one too


@pytest.mark.parametrize("old, new", sorted(config_module.MOVED.items()))
def test_an_old_key_beside_its_new_name_in_an_experiment_file_is_refused_naming_both(old, new, tmp_path):
    section, leaf = new.split(".")
    files = [{new: 2, old: 1}, {old: 1, new: 2}]  # a dotted key, and a mapping (not for pod: one YAML key)
    files += [{old: 1, section: {leaf: 2}}, {section: {leaf: 2}, old: 1}] if section != old else []
    for n, file in enumerate(files):
        path = tmp_path / f"e{n}.yaml"
        path.write_text(yaml.safe_dump({"base": "cartpole-ppo", **file}, sort_keys=False))
        message = error_of(experiment=str(path))
        assert message.startswith(f"{path}: "), message
        _both_names_refused(message, old, new)
    with pytest.raises(ConfigError, match=re.escape(f"config keys {old!r} and {new!r}")):  # a Python experiment's dict
        config_module.translate_moved({old: 1, new: 2} if section == old else {old: 1, section: {leaf: 2}})


def test_old_keys_that_touch_their_new_names_only_in_part_are_refused_or_joined(tmp_path):
    """A section reset (stop=null) beside an old key of it is refused; a dict under an old name
    joins the new name's other keys (ensemble.* beside pod.ensemble.*: the old one dropped the new)."""
    assert "config keys 'target_return' and 'stop' both set 'stop.target_return'" in error_of("stop=null", "target_return=5")
    message = error_of("ensemble.population=3", "pod.ensemble.population=2")
    assert "config keys 'ensemble.population' and 'pod.ensemble.population'" in message, message
    pod = ["pod.enabled=true", "env=batched-cartpole"]
    joined = load_config("cartpole-ppo", [*pod, "ensemble.eval_episodes=3", "pod.ensemble.population=2"])
    assert (joined.pod.ensemble.population, joined.pod.ensemble.eval_episodes) == (2, 3)
    for order in (["pod.device=cuda:7", "pod=true"], ["pod=true", "pod.device=cuda:7"]):  # pod itself was a key
        values = config_module.apply_overrides({}, config_module.translate_moved(parse_overrides(order)))
        assert values == {"pod": {"enabled": True, "device": "cuda:7"}}, order


def test_a_later_input_s_new_key_wins_over_an_earlier_input_s_old_one(tmp_path):
    """One input per layer: the experiment file's old key, then the command line's new one."""
    path = tmp_path / "old.yaml"
    path.write_text("base: cartpole-ppo\ntarget_return: 475\nnum_actor_workers: 2\n")
    config = load_config(str(path), ["stop.target_return=300", "launch.num_actor_workers=3"])
    assert (config.stop.target_return, config.launch.num_actor_workers) == (300, 3)
    assert load_config(str(path), ["stop.target_return=null"]).stop.target_return is None


def test_wrong_type_names_the_field_and_the_value():
    message = error_of("launch.num_actor_workers=two")
    assert "'launch.num_actor_workers'" in message and "'two'" in message


def test_literal_lists_the_allowed_values():
    message = error_of("launch.launcher=slurm")
    assert "'launch.launcher'" in message and "'inline'" in message and "'local'" in message


def test_inconsistent_counts():
    assert "ring_splits" in error_of("dataflow.envs_per_actor=10", "dataflow.ring_splits=3")


def test_algorithm_hyperparameters_are_typed_and_checked():
    assert "'algo.lr'" in error_of("algo.lr=-1")
    message = error_of("algo.learning_rate=1e-3")
    assert "unknown field 'algo.learning_rate'" in message and "lr" in message


def test_unknown_names_list_what_is_registered():
    assert "cartpole-ppo" in error_of(experiment="cartpole-ppp")
    assert "ppo" in error_of("algorithm=ppx")


def test_graph_checks_need_the_spaces():
    from srl.graph import build_graph

    with pytest.raises(ConfigError, match="num_policy_workers"):
        build_graph(load_config("cartpole-ppo", ["launch.num_policy_workers=3", "dataflow.inference=policy_worker"]))
    with pytest.raises(ConfigError, match="field 'env'"):
        build_graph(load_config("cartpole-ppo", ["env=NoSuchEnv-v0"]))


def test_overrides_parse_as_yaml_scalars():
    assert parse_overrides(["a=1", "b=0.5", "c=null", "d.e=x", "f=off", "g=true", "h=!{i: 1}", "j=!null"]) == {
        "a": 1, "b": 0.5, "c": RESET, "d": {"e": "x"}, "f": "off", "g": True, "h": Replace({"i": 1}), "j": Replace(None),
    }
    assert "'env_kwargs=!{a: '" in error_of("env_kwargs=!{a: ")  # a broken value names its override


def test_a_dict_override_merges_and_bang_replaces_it_whole():
    merged = load_config("mpe-mappo", ["env_kwargs={module: mpe2.simple_tag_v3}"]).env_kwargs
    assert merged["module"] == "mpe2.simple_tag_v3" and merged["N"] == 3  # spread's other kwargs kept
    replaced = load_config("mpe-mappo", ["env_kwargs=!{module: mpe2.simple_tag_v3}"]).env_kwargs
    assert replaced == {"module": "mpe2.simple_tag_v3"}
    assert load_config("mpe-mappo", ["env_kwargs.N=!2"]).env_kwargs == {**SPREAD_KWARGS, "N": 2}  # ! on a scalar: as without


def test_null_drops_the_experiments_value_and_bang_null_is_none():
    assert load_config("cartpole-ppo").stop.total_env_steps == 500_000
    assert load_config("cartpole-ppo", ["stop.total_env_steps=null"]).stop.total_env_steps == 1_000_000  # the field's default
    pong = load_config("pong-ppo", ["env_kwargs.repeat_action_probability=null"]).env_kwargs
    assert pong == {"frame_stack": 4}
    assert load_config("pong-ppo", ["env_kwargs=null"]).env_kwargs == {}
    assert load_config("mpe-mappo", ["algo.max_grad_norm=null"]).algo_config.max_grad_norm == 0.5  # experiment: 10
    assert load_config("mpe-mappo", ["algo.max_grad_norm=!null"]).algo_config.max_grad_norm is None
    # a replay field's default is the algorithm's where it has one (Algorithm.default_replay): dqn's ratio
    assert load_config("cartpole-dqn", ["replay.replay_ratio=null"]).replay.replay_ratio == 32.0
    assert load_config("cartpole-dqn", ["replay.replay_ratio=!null"]).replay.replay_ratio is None
    assert load_config("cartpole-dqn", ["replay=null"]).replay.batch_size == 128  # dqn's own replay


def test_a_new_algorithm_starts_from_its_own_defaults():
    from srl.algos import APPOConfig

    appo = load_config("cartpole-ppo", ["algorithm=appo"])  # cartpole-ppo's algo.* are PPO's
    assert appo.algo_config == APPOConfig()
    assert load_config("cartpole-ppo", ["algorithm=appo", "algo.lr=0.01"]).algo_config == APPOConfig(lr=0.01)
    same = load_config("cartpole-ppo", ["algorithm=ppo"])  # not a new one: the experiment's values stay
    assert same.algo_config == load_config("cartpole-ppo").algo_config and same.algo_config.epochs == 10
    assert load_config("pong-ppo", ["policy=actor-critic-mlp"]).policy_kwargs == {}  # trunk_precision was the CNN's
    assert "'algo.gae_lambda'" in error_of("algorithm=appo", "algo.gae_lambda=0.9")  # given ones are still checked


def test_many_unknown_fields_are_listed_once_with_the_allowed_ones():
    message = error_of("algo.a=1", "algo.b=2", "algo.c=3")
    assert "unknown fields 'algo.a', 'algo.b', 'algo.c'; allowed fields: lr, " in message, message
    assert message.count("allowed fields") == 1 and message.count("'algo.a'") == 1
    assert "unknown field 'algo.a'; allowed" in error_of("algo.a=1")


def test_run_dir_names_the_env_when_an_override_changed_it():
    acrobot = load_config("cartpole-ppo", ["env=Acrobot-v1"])
    assert Path(acrobot.run.run_dir).parent == Path("runs") and acrobot.experiment == "cartpole-ppo"
    assert Path(acrobot.run.run_dir).name.startswith("cartpole-ppo-Acrobot-v1-")
    breakout = Path(load_config("pong-ppo", ["env=ALE/Breakout-v5"]).run.run_dir)  # no sub-folder from the slash
    assert breakout.parent == Path("runs") and breakout.name.startswith("pong-ppo-ALE-Breakout-v5-")
    for same in ([], ["env=CartPole-v1"]):  # the experiment's own env: its plain name
        assert re.fullmatch(r"cartpole-ppo-\d{8}-\d{6}", Path(load_config("cartpole-ppo", same).run.run_dir).name)


def test_cli_prints_one_line_without_traceback_and_starts_nothing(tmp_path):
    run_dir = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "launch.launcher=slurm", f"run.run_dir={run_dir}"],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "'launch.launcher'" in proc.stderr
    assert not run_dir.exists()


def test_resolved_config_is_saved_and_reloads(tmp_path):
    config = load_config("cartpole-ppo", ["run.seed=5", f"run.run_dir={tmp_path}"])
    config.dump_yaml(tmp_path / "config.yaml")
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["run"]["seed"] == 5 and saved["algo"]["lr"] == config.algo_config.lr
    again = load_config("ignored", [f"run.resume={tmp_path}"])
    assert again.run.seed == 5 and again.algo_config == config.algo_config


def test_config_reference_in_docs_is_current():
    from pathlib import Path

    from srl.config.doc import config_reference

    doc = Path(__file__).parent.parent / "docs" / "config.md"
    assert doc.read_text().strip() == config_reference().strip(), "regenerate: srl config-doc > docs/config.md"


def test_processes_that_train_may_get_their_own_torch_threads():
    from srl.streams.control import Role

    plain = load_config("cartpole-ppo", ["launch.torch_threads=1"])
    assert plain.threads_for(trains=True) == plain.threads_for(trains=False) == 1
    split = load_config("cartpole-ppo", ["launch.torch_threads=1", "launch.trainer_torch_threads=2"])
    assert (split.threads_for(trains=True), split.threads_for(trains=False)) == (2, 1)
    assert [role for role in Role if role.trains] == [Role.TRAINER, Role.POD]
    assert "'launch.trainer_torch_threads'" in error_of("launch.trainer_torch_threads=0")


def test_srl_show_prints_the_config_a_run_would_use(capsys):
    from srl.cli import main

    assert main(["show", "cartpole-ppo", "run.seed=3", "algo.lr=0.002"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    expected = load_config("cartpole-ppo", ["run.seed=3", "algo.lr=0.002"]).model_dump(mode="json")
    shown["run"].pop("run_dir"), expected["run"].pop("run_dir")  # a new timestamp each time
    assert shown == expected
    assert main(["show", "cartpole-ppo", "run.seed=3", "algo.lr=0.002", "--changed"]) == 0
    changed = yaml.safe_load(capsys.readouterr().out)
    assert changed["run"] == {"seed": 3} and changed["algo"]["lr"] == 0.002 and changed["algo"]["anneal_env_steps"] == 150_000
    assert "env" not in changed and "launch" not in changed  # CartPole-v1 and the local launcher are the defaults
    assert "clip_coef" not in changed["algo"]  # 0.2: PPO's default
    assert main(["show", "cartpole-ppo", "algo.lr=-1"]) == 2  # a bad value: the field named, as for run
    assert "algo.lr" in capsys.readouterr().err
