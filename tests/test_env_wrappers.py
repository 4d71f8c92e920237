"""`env_wrappers`: Gymnasium wrappers from the config, around every env srl builds (actors, the
evaluator, `srl eval`, `srl eval --video`), sizing the streams; a bad entry is one line before launch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import srl
from srl.config import ConfigError
from srl.config.load import load_config
from srl.envs import make_vector_env
from srl.envs.wrappers import resolve
from srl.evaluate import evaluate_run
from srl.graph import build_graph
from srl.launch.run import run_experiment

TESTS = Path(__file__).parent
LIMIT = 5  # steps per episode under the TimeLimit below; CartPole's own episodes run longer at random
SHORT = f"{{path: gymnasium.wrappers.TimeLimit, kwargs: {{max_episode_steps: {LIMIT}}}}}"
SMALL = ["launch.launcher=local", "launch.num_actor_workers=2", "dataflow.envs_per_actor=4", "dataflow.inference=inline", "stop.total_env_steps=3000",
         "stop.target_return=null", "monitor.display=off", "monitor.learning_curve=false"]


def srl_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The `srl` console script, with this checkout and the tests' modules (wrap_probe) importable."""
    script = Path(sys.executable).parent / "srl"
    path = os.pathsep.join([str(Path(srl.__file__).resolve().parent.parent), str(TESTS)])
    return subprocess.run([str(script), *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": path})


def test_actors_the_evaluator_and_srl_eval_each_wrap_their_envs(tmp_path):
    log = tmp_path / "wraps.txt"
    wrappers = f"env_wrappers=[{{path: wrap_probe.LogWraps, kwargs: {{log: '{log}'}}}}, {SHORT}]"
    run_dir = tmp_path / "run"
    config = load_config("cartpole-ppo", [*SMALL, wrappers, f"run.run_dir={run_dir}", "eval.episodes=2",
                                          "eval.interval_s=0.1"])
    assert run_experiment(config) == 0
    titles = log.read_text().split()
    workers = Counter(t.removeprefix("srl:cartpole-ppo:") for t in titles if t.startswith("srl:"))
    assert workers == {"actor:0": 4, "actor:1": 4, "eval:0": 1}, titles  # each actor's ring, the evaluator's env
    assert len(titles) > sum(workers.values())  # and this process's, which sized the streams

    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    lengths = [r["episode_length_mean"] for r in rows if r.get("episode_length_mean") is not None]
    assert lengths and max(lengths) <= LIMIT, lengths  # the actors' episodes end at the wrapper's limit
    evaluated = [r["eval/episode_return_mean"] for r in rows if r.get("eval/episode_return_mean") is not None]
    assert evaluated and max(evaluated) <= LIMIT, evaluated  # and so do the evaluator's

    log.write_text("")
    result = json.loads(srl_cli("eval", str(run_dir), "--episodes", "3", cwd=tmp_path).stdout)
    assert len(result["returns"]) == 3 and max(result["returns"]) <= LIMIT, result
    assert log.read_text().count("\n") >= 1  # `srl eval` built its env through the wrappers too


def test_srl_eval_video_records_the_wrapped_episodes(tmp_path):
    run_dir = tmp_path / "run"
    config = load_config("cartpole-ppo", [*SMALL, "launch.launcher=inline", f"env_wrappers=[{SHORT}]", f"run.run_dir={run_dir}"])
    assert run_experiment(config) == 0
    result = evaluate_run(run_dir, episodes=2, seed=3, video=tmp_path / "play.mp4")
    assert max(result["returns"]) <= LIMIT
    assert 2 <= result["video_frames"] <= 2 * LIMIT, result  # one frame per step of episodes cut at LIMIT
    assert (tmp_path / "play.mp4").stat().st_size > 0


def test_the_streams_are_sized_from_the_wrapped_env(tmp_path):
    """A wrapper that adds a feature: the graph, the policy and the actors' segments all have 5."""
    wrappers = "env_wrappers=[{path: wrap_probe.AppendConstant, kwargs: {value: 0.5}}]"
    config = load_config("cartpole-ppo", [*SMALL, "launch.launcher=inline", wrappers, f"run.run_dir={tmp_path / 'run'}"])
    graph = build_graph(config)
    assert graph.observation_space.shape == (5,)
    assert run_experiment(config) == 0

    venv = make_vector_env("CartPole-v1", {}, 3, wrappers=config.env_wrappers)
    try:
        obs = venv.reset(seed=0)
        assert obs.shape == (3, 5) and np.all(obs[:, 4] == 0.5)
    finally:
        venv.close()


def test_wrappers_apply_in_order_the_first_innermost():
    config = load_config("cartpole-ppo", [
        "env_wrappers=[wrap_probe.AppendConstant, {path: 'wrap_probe:AppendConstant', kwargs: {value: 2.0}}]"
    ])
    venv = make_vector_env(config.env, {}, 1, wrappers=config.env_wrappers)
    try:
        assert list(venv.reset(seed=0)[0, 4:]) == [1.0, 2.0]
    finally:
        venv.close()
    assert [w.model_dump() for w in config.env_wrappers] == [
        {"path": "wrap_probe.AppendConstant", "kwargs": {}},
        {"path": "wrap_probe:AppendConstant", "kwargs": {"value": 2.0}},
    ]


def test_the_gymnasium_factory_and_atari_ids_are_wrapped_too():
    config = load_config("cartpole-ppo", ["env=gymnasium", "env_kwargs={id: CartPole-v1}",
                                          "env_wrappers=[wrap_probe.AppendConstant]"])
    assert build_graph(config).observation_space.shape == (5,)
    pong = load_config("pong-ppo", [f"env_wrappers=[{SHORT}]", "env_backend=loop"])
    venv = make_vector_env(pong.env, pong.env_kwargs, 1, wrappers=pong.env_wrappers)
    try:
        venv.reset(seed=0)
        cut = [bool(venv.step(np.zeros((1,), np.int64)).truncated[0]) for _ in range(LIMIT)]
        assert cut == [False] * (LIMIT - 1) + [True]  # a Pong episode lasts thousands of steps
    finally:
        venv.close()


@pytest.mark.parametrize("entry, reason", [
    ("nopkg.Wrapper", "no module named 'nopkg'"),
    ("gymnasium.wrappers.TimeLimitt", "module 'gymnasium.wrappers' has no attribute 'TimeLimitt'"),
    ("math.pi", "float object is not callable"),
    ("TimeLimit", "'TimeLimit' is not an import path"),
    ("{path: gymnasium.wrappers.TimeLimit, kwargs: {max_steps: 3}}", "missing a required argument"),
])
def test_a_bad_entry_is_one_line_naming_the_field_the_entry_and_why_before_launch(tmp_path, entry, reason):
    proc = srl_cli("run", "cartpole-ppo", f"env_wrappers=[wrap_probe.AppendConstant, {entry}]",
                   f"run.run_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == "", proc
    [line] = proc.stderr.splitlines()
    assert line.startswith("srl: field 'env_wrappers': entry 1 ("), line
    assert reason in line, line
    assert not (tmp_path / "run").exists()  # refused before the run dir, let alone a worker


def test_wrappers_need_a_gymnasium_env_stepped_one_by_one():
    with pytest.raises(ConfigError, match=r"^field 'env_wrappers': env_wrappers apply to Gymnasium envs only; "
                                          r"env 'pettingzoo-mappo'"):
        load_config("mpe-mappo", [f"env_wrappers=[{SHORT}]"])
    with pytest.raises(ConfigError, match="env_wrappers apply to Gymnasium envs only; env 'batched-cartpole'"):
        load_config("cartpole-pod", [f"env_wrappers=[{SHORT}]"])
    for backend in ("vector", "envpool"):
        with pytest.raises(ConfigError, match=rf"field 'env_backend': '{backend}' steps all envs in one call"):
            load_config("cartpole-ppo", [f"env_wrappers=[{SHORT}]", f"env_backend={backend}"])
    auto = load_config("cartpole-ppo", [f"env_wrappers=[{SHORT}]", "env_backend=auto"])
    venv = make_vector_env(auto.env, {}, 2, backend="auto", wrappers=auto.env_wrappers)
    try:  # auto steps CartPole-v1 in one vector call, unless there are wrappers
        assert type(venv).__name__ == "GymVectorEnv"
    finally:
        venv.close()


def test_a_wrapper_that_returns_no_env_is_named():
    config = load_config("cartpole-ppo", ["env_wrappers=[wrap_probe.not_an_env]"])
    with pytest.raises(ConfigError, match=r"field 'env': env_wrappers entry 'wrap_probe.not_an_env' returned str"):
        build_graph(config)


def test_resolve_paths():
    from gymnasium.wrappers import TimeLimit

    assert resolve("gymnasium.wrappers.TimeLimit") is TimeLimit
    assert resolve("gymnasium.wrappers:TimeLimit") is TimeLimit
    assert resolve("gymnasium.wrappers.TimeLimit.step") is TimeLimit.step  # a nested attribute
    with pytest.raises(ValueError, match="no module named 'nopkg'"):
        resolve("nopkg.sub:Thing")


def test_minigrid_doorkey_with_its_image_wrapper_builds_and_runs(tmp_path):
    """MiniGrid's Dict observation (with its text mission) becomes its image alone (7x7x3 uint8)."""
    overrides = ["env=MiniGrid-DoorKey-5x5-v0", "env_wrappers=[minigrid.wrappers.ImgObsWrapper]"]
    config = load_config("cartpole-ppo", [*SMALL, "launch.launcher=inline", *overrides, "stop.total_env_steps=600",
                                          f"run.run_dir={tmp_path / 'run'}"])
    graph = build_graph(config)
    assert graph.observation_space.shape == (7, 7, 3) and graph.observation_space.dtype == np.uint8
    assert graph.action_space.n == 7
    assert run_experiment(config) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["env_steps"] >= 600, summary
