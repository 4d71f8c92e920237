"""Gymnasium wrappers named in the config (`env_wrappers`), applied to every env srl builds.

An entry is an import path and keyword arguments; the callable it names is called with the env
first: `path(env, **kwargs)` (a `gymnasium.Wrapper` class, or any function returning a
`gymnasium.Env`). Entries apply in order, the first innermost, on top of what `gymnasium.make`
(or srl's Atari preprocessing) returns. The path is `package.module.Name` or
`package.module:Name` (the colon says where the module ends; an attribute may be nested).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import gymnasium as gym


class WrapperEntry(Protocol):
    """What an `env_wrappers` entry holds (srl.config.EnvWrapper)."""

    @property
    def path(self) -> str: ...

    @property
    def kwargs(self) -> Mapping[str, Any]: ...


def resolve(path: str) -> Callable[..., Any]:
    """The object `path` names; ValueError with the reason (what could not be imported or found)."""
    module_name, colon, attrs = path.partition(":")
    if colon:
        return _attribute(_import(module_name, path), attrs, path)
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # the longest importable module prefix
        module_name = ".".join(parts[:cut])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if not _is_missing(module_name, e):
                raise  # the module is there and something it imports is not: its traceback says what
            continue
        return _attribute(module, ".".join(parts[cut:]), path)
    raise ValueError(f"no module named {parts[0]!r}" if len(parts) > 1 else
                     f"{path!r} is not an import path (package.module.Name or package.module:Name)")


def _import(module_name: str, path: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if not _is_missing(module_name, e):
            raise
        raise ValueError(f"no module named {e.name!r}") from None


def _is_missing(module_name: str, error: ModuleNotFoundError) -> bool:
    """The error is about `module_name` (or a package above it) itself, not about an import inside it."""
    return error.name is not None and (module_name == error.name or module_name.startswith(error.name + "."))


def _attribute(module: Any, attrs: str, path: str) -> Any:
    found = module
    for name in attrs.split("."):
        if not hasattr(found, name):
            raise ValueError(f"module {module.__name__!r} has no attribute {attrs!r}")
        found = getattr(found, name)
    return found


def check(path: str, kwargs: Mapping[str, Any]) -> None:
    """ValueError unless `path` imports, names a callable, and takes (env, **kwargs)."""
    fn = resolve(path)
    if not callable(fn):
        raise ValueError(f"{type(fn).__name__} object is not callable")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have none: calling it will tell
        return
    try:
        signature.bind(None, **kwargs)
    except TypeError as e:
        raise ValueError(f"it cannot be called as {path.rpartition('.')[2]}(env, **kwargs): {e}") from None


def wrap(env: gym.Env, wrappers: Sequence[WrapperEntry]) -> gym.Env:
    """`env` inside every wrapper of `wrappers`, the first innermost."""
    for entry in wrappers:
        env = resolve(entry.path)(env, **dict(entry.kwargs))
        if not isinstance(env, gym.Env):
            raise TypeError(f"env_wrappers entry {entry.path!r} returned {type(env).__name__}, not a gymnasium.Env")
    return env
