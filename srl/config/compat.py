"""Which algorithm, policy and env go together: one check, before any process starts.

Algorithms declare what they train (`srl.api.Algorithm`: policy_kind, action_spaces,
needs_replay, trains_recurrent, needs_recurrent) and policies what they are (`srl.api.Policy`:
kind, action_spaces, recurrent). `check_combination` compares the declarations of the config's
algorithm and policy with each other, with the env's action space and with `replay`, and names
every mismatch with the fields involved and what would fit. Without it the trainer would build
the algorithm, fail on the policy, and be restarted until it gives up. What a policy leaves
undeclared (a user's own; any policy a factory function builds) is not checked here: its
algorithm checks what it needs when built (Algorithm.require_kind).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import gymnasium as gym

from srl.api import registry
from srl.api.algorithm import Algorithm
from srl.api.policy import Policy
from srl.config import ConfigError, ExperimentConfig


def check_combination(config: ExperimentConfig, action_space: gym.Space,
                      policy: Policy | Callable[..., Policy]) -> None:
    """Raise one ConfigError listing every mismatch; `policy` is the policy (or its registered
    factory) whose class attributes declare what it is."""
    algo = registry.algorithms.get(config.algorithm).algorithm_cls
    problems = _space_problems(config, algo, action_space)
    problems += _policy_problems(config, algo, policy, action_space, _fits(action_space, algo.action_spaces))
    problems += _replay_problems(config, algo)
    if problems:
        raise ConfigError("; ".join(problems))


def _space_problems(config: ExperimentConfig, algo: type[Algorithm], space: gym.Space) -> list[str]:
    problems = []
    if not _fits(space, algo.action_spaces):
        problems.append(
            f"fields 'env' and 'algorithm': env {config.env!r} has a {_name(space)} action space, algorithm "
            f"{config.algorithm!r} needs {_names(algo.action_spaces)} (algorithms that fit {_name(space)}: "
            f"{_list(n for n in registry.algorithms.names() if _fits(space, _algorithm(n).action_spaces))})"
        )
    return problems


def _policy_problems(config: ExperimentConfig, algo: type[Algorithm], policy: Policy | Callable[..., Policy],
                     space: gym.Space, env_fits: bool) -> list[str]:
    declared = declared_class(policy)
    kind, recurrent = declared.kind, declared.recurrent
    name, problems = config.policy, []

    def fit() -> str:  # every registered policy looked at: only for a message that names a problem
        return f"policies that fit: {_list(fitting_policies(config.algorithm, space if env_fits else None))}"

    if algo.policy_kind is not None and kind is not None and kind != algo.policy_kind:
        problems.append(
            f"field 'policy': algorithm {config.algorithm!r} needs a policy of kind {algo.policy_kind} ({fit()}), "
            f"{name!r} is of kind {kind}"
        )
    elif recurrent and not algo.trains_recurrent:
        can = _list(n for n in registry.algorithms.names() if _algorithm(n).trains_recurrent)
        problems.append(
            f"field 'algorithm': {config.algorithm!r} cannot train the recurrent policy {name!r} "
            f"(algorithms that can: {can}; {fit()})"
        )
    elif algo.needs_recurrent and not recurrent and kind is not None:
        problems.append(f"field 'policy': algorithm {config.algorithm!r} needs a recurrent policy ({fit()}), "
                        f"{name!r} is feed-forward")
    spaces = declared.action_spaces
    if env_fits and not _fits(space, spaces):  # else the env's problem above says it
        problems.append(
            f"field 'policy': {name!r} acts in {_names(spaces)} action spaces, env {config.env!r} has "
            f"{_name(space)} ({fit()})"
        )
    return problems


def _replay_problems(config: ExperimentConfig, algo: type[Algorithm]) -> list[str]:
    name = config.algorithm
    if algo.needs_replay and config.pod.enabled:
        fit = _list(n for n in registry.algorithms.names() if not _algorithm(n).needs_replay)
        return [f"field 'algorithm': {name!r} learns from replay, which a pod (pod=true) cannot hold ({fit} can)"]
    if algo.needs_replay and config.replay is None:
        return [f"field 'replay': algorithm {name!r} learns from replay: set replay (e.g. replay={{}})"]
    if not algo.needs_replay and config.replay is not None:
        return [f"field 'replay': algorithm {name!r} learns from segments, not replay: unset it (replay=null)"]
    return []


def fitting_policies(algorithm: str, action_space: gym.Space | None = None) -> list[str]:
    """Registered policies that declare what `algorithm` needs (and act in `action_space`, if given)."""
    algo, names = _algorithm(algorithm), []
    for name in registry.policies.names():
        policy = declared_class(registry.policies.get(name))
        kind, recurrent = policy.kind, policy.recurrent
        if kind is None or (algo.policy_kind is not None and kind != algo.policy_kind):
            continue
        if (recurrent and not algo.trains_recurrent) or (algo.needs_recurrent and not recurrent):
            continue
        if action_space is None or _fits(action_space, policy.action_spaces):
            names.append(name)
    return names


def declared_class(policy: Policy | Callable[..., Policy]) -> type[Policy]:
    """The class whose flags say what `policy` is: a policy's own class, or a registered factory
    that is a Policy class; a factory function declares nothing (the base class's defaults)."""
    if isinstance(policy, Policy):
        return type(policy)
    return policy if isinstance(policy, type) and issubclass(policy, Policy) else Policy


def _algorithm(name: str) -> type[Algorithm]:
    return registry.algorithms.get(name).algorithm_cls


def _fits(space: gym.Space, spaces: tuple[type[gym.Space], ...]) -> bool:
    return not spaces or isinstance(space, spaces)


def _name(space: gym.Space) -> str:
    return type(space).__name__


def _names(spaces: tuple[type[gym.Space], ...]) -> str:
    return " or ".join(s.__name__ for s in spaces)


def _list(names: Iterable[str]) -> str:
    return ", ".join(names) or "none registered"
