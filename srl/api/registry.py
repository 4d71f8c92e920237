"""Registries: a user's own environment, policy, algorithm and experiment plug in by name.

    from srl.api import registry

    @registry.register_env("my-env")
    def make_my_env(**kwargs) -> Environment | VectorEnv: ...

    registry.register_algorithm("my-algo", MyAlgorithm, MyAlgorithmConfig)

Registering happens at import time of the user's module; `srl run EXPERIMENT modules=my_pkg.my_mod`
(the config field `modules`, comma-separated) imports it in the controller and in every worker
before anything is built, from the Python path or the current directory.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from srl.api.algorithm import Algorithm, AlgorithmConfig

T = TypeVar("T")


class UnknownNameError(KeyError):
    """A name that no registry entry matches; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class Registry(Generic[T]):
    """Name -> entry, with errors that list what is registered."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> T:
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        if name not in self._entries:
            close = difflib.get_close_matches(name, self._entries, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownNameError(
                f"unknown {self.kind} {name!r}; registered: {', '.join(sorted(self._entries)) or 'none'}.{hint}"
            )
        return self._entries[name]

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)


@dataclass(frozen=True)
class AlgorithmEntry:
    algorithm_cls: type[Algorithm]
    config_cls: type[AlgorithmConfig]


@dataclass(frozen=True)
class WorkerEntry:
    kernel_cls: type  # a srl.api.worker.Worker
    inputs: tuple[str, ...]  # "samples", or another kind's output
    outputs: tuple[str, ...]  # streams of its own, each read by one placed worker
    max_message_bytes: int  # of an output's messages (its frame)


envs: Registry[Callable[..., Any]] = Registry("environment")
policies: Registry[Callable[..., Any]] = Registry("policy")
algorithms: Registry[AlgorithmEntry] = Registry("algorithm")
# an experiment function returns an srl.config.ExperimentConfig (or a dict of its values); srl.config
# imports this module, so the type is not named here (an import, even for type checking, is a circle)
Experiment = Callable[[], Any]
experiments: Registry[Experiment] = Registry("experiment")
E = TypeVar("E", bound=Experiment)
workers: Registry[WorkerEntry] = Registry("worker kind")


def register_env(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a factory `(**kwargs) -> Environment | VectorEnv`."""
    return lambda factory: envs.add(name, factory)


def register_policy(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a factory `(observation_space, action_space, **kwargs) -> Policy`."""
    return lambda factory: policies.add(name, factory)


def register_algorithm(name: str, algorithm_cls: type[Algorithm], config_cls: type[AlgorithmConfig]) -> None:
    """Register an `Algorithm` subclass with its `AlgorithmConfig` subclass."""
    algorithms.add(name, AlgorithmEntry(algorithm_cls, config_cls))


def register_experiment(name: str) -> Callable[[E], E]:
    """Decorate a function returning an experiment's config: an ExperimentConfig of what differs from the
    defaults, or a dict of config values (overrides apply on top of either)."""
    def add(fn: E) -> E:
        experiments.add(name, fn)
        return fn

    return add


def register_worker(
    kind: str, inputs: tuple[str, ...] = (), outputs: tuple[str, ...] = (), max_message_bytes: int = 1 << 16
) -> Callable[[type], type]:
    """Decorate a `srl.api.worker.Worker` subclass: the kind `extra_workers` places, with the
    streams it takes (`inputs`) and gives (`outputs`)."""

    def add(cls: type) -> type:
        workers.add(kind, WorkerEntry(cls, tuple(inputs), tuple(outputs), max_message_bytes))
        return cls

    return add
