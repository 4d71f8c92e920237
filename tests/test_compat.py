"""Algorithm, policy, action space and replay that do not go together are a ConfigError before launch.

Each built-in algorithm is tried against a policy of the wrong kind, an action space it does not
handle, the wrong recurrence and the wrong `replay`; each error must name the field and what would
fit. Every built-in experiment must still pass. Algorithms and policies come from the registry, so
one added later is tested too.
"""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import srl.builtins  # noqa: F401  (registers what the parametrizations below iterate)
from srl.api import registry
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.config.compat import check_combination, declared_class, fitting_policies
from srl.config.load import load_config
from srl.graph import build_graph

# the built-in algorithms (other test modules register their own, which the suite may collect first)
ALGORITHMS = [n for n in registry.algorithms.names() if registry.algorithms.get(n).algorithm_cls.__module__.startswith("srl.")]
SPACES = [gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (1,), np.float32), gym.spaces.MultiBinary(2),
          gym.spaces.Tuple([gym.spaces.Discrete(2)])]  # no built-in algorithm acts in a Tuple
ENV_OF = {gym.spaces.Discrete: "CartPole-v1", gym.spaces.Box: "Pendulum-v1"}
ENV_OF_SPACE = {"CartPole-v1": gym.spaces.Discrete(2), "Pendulum-v1": gym.spaces.Box(-2.0, 2.0, (1,), np.float32),
                "pettingzoo-mappo": gym.spaces.Discrete(5)}
TEAM_ENV_KWARGS = {"module": "mpe2.simple_spread_v3", "N": 2, "max_cycles": 25, "continuous_actions": False}


def algorithm_cls(name: str) -> type:
    return registry.algorithms.get(name).algorithm_cls


def env_for(name: str) -> str:
    """A built-in env whose action space the algorithm handles (a team's, for value decomposition)."""
    if algorithm_cls(name).team_transitions:
        return "pettingzoo-mappo"
    spaces = algorithm_cls(name).action_spaces or (gym.spaces.Discrete,)
    return ENV_OF[spaces[0]]


def config(algorithm: str, policy: str, env: str | None = None, **values):
    replay = {} if algorithm_cls(algorithm).needs_replay else None
    if (env or env_for(algorithm)) == "pettingzoo-mappo":
        values.setdefault("env_kwargs", TEAM_ENV_KWARGS)
    return build_config({"experiment": "compat", "launcher": "inline", "env": env or env_for(algorithm),
                         "algorithm": algorithm, "policy": policy, "replay": replay, **values})


def error_of(cfg) -> str:
    with pytest.raises(ConfigError) as info:
        build_graph(cfg)
    return str(info.value)


def declared(policy: str, flag: str):
    return getattr(declared_class(registry.policies.get(policy)), flag)


@pytest.mark.parametrize("experiment", registry.experiments.names())
def test_every_builtin_experiment_passes_the_check(experiment):
    graph = build_graph(load_config(experiment))
    check_combination(graph.config, graph.action_space, registry.policies.get(graph.config.policy))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_has_a_fitting_policy_that_builds(algorithm):
    env = env_for(algorithm)
    space = ENV_OF_SPACE[env]
    built = []
    for policy in fitting_policies(algorithm, space):
        try:
            built.append(build_graph(config(algorithm, policy, env)).config.policy)
        except ConfigError as e:  # declared to fit, but the observations do not suit it (an image CNN)
            assert "field 'policy'" in str(e) and "observation" in str(e), str(e)
    assert built, f"no registered policy fits {algorithm!r} on {env}"


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if algorithm_cls(a).policy_kind is not None])
def test_every_algorithm_refuses_a_policy_of_another_kind(algorithm):
    env = env_for(algorithm)
    space = ENV_OF_SPACE[env]
    wanted = algorithm_cls(algorithm).policy_kind
    wrong = [p for p in registry.policies.names()
             if declared(p, "kind") not in (None, wanted) and isinstance(space, declared(p, "action_spaces"))]
    assert wrong, f"no registered policy of another kind than {wanted!r} acts in {space}"
    for policy in wrong:
        message = error_of(config(algorithm, policy, env))
        assert f"field 'policy': algorithm {algorithm!r} needs a policy of kind {wanted}" in message, message
        assert f"{policy!r} is of kind {declared(policy, 'kind')}" in message, message
        assert "policies that fit: " + ", ".join(fitting_policies(algorithm, space)) in message, message


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if algorithm_cls(a).action_spaces])
def test_every_algorithm_refuses_an_action_space_it_does_not_handle(algorithm):
    space = next(s for s in SPACES if not isinstance(s, algorithm_cls(algorithm).action_spaces))
    policy = fitting_policies(algorithm)[0]
    cfg = config(algorithm, policy)
    with pytest.raises(ConfigError) as info:
        check_combination(cfg, space, registry.policies.get(policy))
    message = str(info.value)
    needs = " or ".join(s.__name__ for s in algorithm_cls(algorithm).action_spaces)
    assert f"fields 'env' and 'algorithm': env {cfg.env!r} has a {type(space).__name__} action space, algorithm " \
           f"{algorithm!r} needs {needs}" in message, message
    # every registered algorithm, users' too: other test modules register some of their own
    fit = [a for a in registry.algorithms.names()
           if not algorithm_cls(a).action_spaces or isinstance(space, algorithm_cls(a).action_spaces)]
    assert f"(algorithms that fit {type(space).__name__}: {', '.join(fit)})" in message


@pytest.mark.parametrize("algorithm, env", [
    ("sac", "CartPole-v1"), ("sac", "Acrobot-v1"), ("dqn", "Pendulum-v1"), ("r2d2", "Pendulum-v1"),
])  # fmt: skip
def test_a_real_env_of_the_wrong_action_space_is_refused_with_the_env_named(algorithm, env):
    message = error_of(config(algorithm, fitting_policies(algorithm)[0], env))
    assert f"env {env!r} has a" in message and f"algorithm {algorithm!r} needs" in message, message


@pytest.mark.parametrize("algorithm", [
    a for a in ALGORITHMS
    if any(declared(p, "recurrent") != (algorithm_cls(a).trains_recurrent or algorithm_cls(a).needs_recurrent)
           for p in registry.policies.names() if declared(p, "kind") == algorithm_cls(a).policy_kind)
])  # fmt: skip
def test_recurrence_must_match(algorithm):
    """An algorithm that cannot train a recurrent policy refuses one; one that needs it refuses the others."""
    cls = algorithm_cls(algorithm)
    for policy in [p for p in registry.policies.names() if declared(p, "kind") == cls.policy_kind]:
        recurrent = declared(policy, "recurrent")
        if recurrent and not cls.trains_recurrent:
            message = error_of(config(algorithm, policy))
            assert f"field 'algorithm': {algorithm!r} cannot train the recurrent policy {policy!r}" in message, message
        elif cls.needs_recurrent and not recurrent:
            message = error_of(config(algorithm, policy, algo={"burn_in": 0}))
            assert f"field 'policy': algorithm {algorithm!r} needs a recurrent policy" in message, message
            assert f"policies that fit: {', '.join(fitting_policies(algorithm, gym.spaces.Discrete(2)))}" in message


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_replay_must_be_set_exactly_for_replay_algorithms(algorithm):
    needs = algorithm_cls(algorithm).needs_replay
    policy = next(p for p in fitting_policies(algorithm, ENV_OF_SPACE[env_for(algorithm)]) if "cnn" not in p)
    message = error_of(config(algorithm, policy, replay=None if needs else {}))
    assert message.startswith("field 'replay'"), message
    assert ("set replay" if needs else "unset it") in message


def test_a_pod_refuses_replay_algorithms():
    message = error_of(load_config("cartpole-pod", ["algorithm=dqn", "policy=q-mlp"]))
    assert "field 'algorithm': 'dqn' learns from replay, which a pod (pod=true) cannot hold" in message, message
    on_policy = [a for a in registry.algorithms.names() if not algorithm_cls(a).needs_replay]
    assert {"appo", "impala", "none", "ppo"} <= set(on_policy)  # and any that other test modules registered
    assert f"({', '.join(on_policy)} can)" in message, message


def test_a_policy_that_cannot_act_in_the_env_names_the_policies_that_can():
    message = error_of(load_config("cartpole-ppo", ["algorithm=none", "policy=q-mlp", "env=Pendulum-v1"]))
    assert "field 'policy': 'q-mlp' acts in Discrete action spaces, env 'Pendulum-v1' has Box" in message, message
    fit = fitting_policies("none", gym.spaces.Box(-1, 1, (1,)))
    assert {"actor-critic-mlp", "random", "squashed-gaussian-mlp"} <= set(fit) and "q-mlp" not in fit, fit
    assert "policies that fit: " + ", ".join(fit) in message, message


def test_undeclared_policies_are_checked_by_the_class_they_build():
    """A factory function declares nothing; the policy it returns does, and is checked once built."""
    from srl.models import ActorCriticMLP

    registry.policies.add("test-factory", lambda observation_space, action_space: ActorCriticMLP(
        observation_space, action_space))  # fmt: skip
    try:
        build_graph(config("ppo", "test-factory"))
        message = error_of(config("dqn", "test-factory"))
        assert "field 'policy': algorithm 'dqn' needs a policy of kind q-network" in message, message
        assert "test-factory" not in fitting_policies("ppo")  # undeclared: never suggested
    finally:
        registry.policies._entries.pop("test-factory")


def test_the_issue_command_fails_before_any_process_starts(tmp_path):
    run_dir = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "pendulum-sac", "env=Acrobot-v1", "policy=actor-critic-mlp",
         f"run.run_dir={run_dir}"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and not run_dir.exists()
    assert "env 'Acrobot-v1' has a Discrete action space, algorithm 'sac' needs Box" in proc.stderr
    assert "algorithm 'sac' needs a policy of kind squashed-gaussian (policies that fit: squashed-gaussian-mlp)" \
        in proc.stderr


def test_every_builtin_algorithm_and_policy_declares_what_it_needs_and_is():
    """Only declarations are checked: a built-in without them would escape every test above."""
    builtin = [a for a in ALGORITHMS if algorithm_cls(a).__module__.startswith("srl.")]
    assert [a for a in builtin if algorithm_cls(a).policy_kind is None] == ["none"]  # trains nothing
    assert [a for a in builtin if not algorithm_cls(a).action_spaces] == ["none"]
    for policy in registry.policies.names():
        if registry.policies.get(policy).__module__.startswith("srl."):
            assert declared(policy, "kind") and declared(policy, "action_spaces"), policy
