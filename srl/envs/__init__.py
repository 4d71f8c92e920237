"""Building environments by name: srl's registry first, then any Gymnasium id.

    venv = make_vector_env("CartPole-v1", {}, num_envs=16, env_index_offset=0)
    venv = make_vector_env("pettingzoo", {"module": "pettingzoo.butterfly.pistonball_v6"}, 2, 0)

Registered here: "gymnasium" (kwargs `id` plus the rest for `gymnasium.make`), "pettingzoo" (kwargs
`module` naming a PettingZoo env module plus the rest for its `parallel_env()`), "pettingzoo-mappo"
(the same, with the global state in every row, srl.envs.central_state) and "pettingzoo-aec" (a
turn-based AEC game: `module.env()`, srl.envs.pettingzoo_aec). The test doubles ("counting" and its
Gymnasium ids) live in srl.testing, loaded by tests or with `modules=srl.testing`.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from srl.api import registry
from srl.api.env import Environment, VectorEnv
from srl.envs.atari import is_atari_id, make_atari
from srl.envs.central_state import CentralStateEnvironment
from srl.envs.goals import BitFlippingEnv  # registers the Gymnasium id BitFlipping-v0
from srl.envs.gym_env import GymEnvironment, GymVectorEnv, make_gym_envs
from srl.envs.mujoco import is_mujoco_id, require_mujoco
from srl.envs.native import NativeVectorEnv
from srl.envs.native_backends import EnvPoolBackend, GymVectorBackend, resolve_backend, single_env_kwargs
from srl.envs.partial import MaskVelocity  # registers the Gymnasium id CartPoleNoVel-v1
from srl.envs.pettingzoo_aec import AECEnvironment
from srl.envs.pettingzoo_env import PettingZooEnvironment, import_env_module, make_pettingzoo_env
from srl.envs.seats import AlternatingSeats
from srl.envs.vector import SerialVectorEnv
from srl.envs.wrappers import WrapperEntry, resolve, wrap

__all__ = [
    "BitFlippingEnv",
    "GymEnvironment",
    "GymVectorEnv",
    "MaskVelocity",
    "NativeVectorEnv",
    "PettingZooEnvironment",
    "SerialVectorEnv",
    "describe_agents",
    "describe_spaces",
    "make_vector_env",
    "single_env_kwargs",
]


@registry.register_env("gymnasium")
def gymnasium_env(id: str, num_envs: int | None = None, **kwargs: Any) -> Environment | VectorEnv:
    """`gymnasium.make(id, **kwargs)`: a `GymVectorEnv` of `num_envs` envs, or one `GymEnvironment`."""
    if num_envs is None:
        return GymEnvironment(gym.make(id, **kwargs))
    return GymVectorEnv.make(id, num_envs, **kwargs)


registry.register_env("pettingzoo")(make_pettingzoo_env)


@registry.register_env("pettingzoo-mappo")
def pettingzoo_mappo_env(module: str, **kwargs: Any) -> Environment:
    """A PettingZoo parallel env whose rows carry the global state (for the "mappo" policy)."""
    return CentralStateEnvironment(make_pettingzoo_env(module, **kwargs))


@registry.register_env("pettingzoo-aec")
def pettingzoo_aec_env(module: str, sides: list[str] | None = None, env_id: int = 0, **kwargs: Any) -> Environment:
    """A turn-based PettingZoo AEC game (module.env(**kwargs)), rows with the global state and
    the acting agent's action mask (for the "mappo" policy). `sides` (two names): a two-player
    game's agents are these sides, which change seats every episode (srl.envs.seats)."""
    factory = getattr(import_env_module(module), "env", None)
    if factory is None:
        raise ValueError(f"module {module!r} has no env(); name a PettingZoo AEC module such as "
                         "'pettingzoo.classic.tictactoe_v3'")
    game: Environment = AECEnvironment(factory(**kwargs))
    if sides is not None:
        game = AlternatingSeats(game, sides, env_id)
    return CentralStateEnvironment(game)


def _keyword_params(factory: Callable[..., Any]) -> set[str]:
    """Parameters `factory` names explicitly and accepts by keyword (not **kwargs)."""
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return set()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in params if p.kind in kinds}


def _is_gymnasium_id(name: str) -> bool:
    return name in gym.envs.registry or ":" in name  # "module:EnvId" makes gymnasium import module


def make_vector_env(
    name: str, kwargs: Mapping[str, Any] | None, num_envs: int, env_index_offset: int = 0, backend: str = "loop",
    wrappers: Sequence[WrapperEntry] = (),
) -> VectorEnv:
    """Build `num_envs` environments called `name` as one `VectorEnv`.

    `backend` (config `env_backend`): "loop" steps one env after another as described below;
    "vector" / "envpool" step them all in one call (`srl.envs.native`); "auto" picks "vector" for
    Gymnasium ids with a vector entry point srl knows (CartPole-v1) and no kwargs, "envpool" for
    Atari ids where EnvPool is installed (srl.envs.native_backends.backend_choice), else "loop".

    `name` is looked up in `srl.api.registry.envs` first. A factory that names a `num_envs`
    parameter builds the whole batch itself: it gets `num_envs` (and `env_index_offset` if it
    names that too) and must return a `VectorEnv` of `num_envs` envs. Any other factory is
    called once per env, with `env_id=env_index_offset + i` if it names an `env_id` parameter;
    the `Environment`s it returns are wrapped in a `SerialVectorEnv` (a factory that returns a
    `VectorEnv` this way must return one of exactly `num_envs` envs, when called once).

    An Atari id ("ALE/Pong-v5") gives a `GymVectorEnv` of preprocessed envs (srl.envs.atari); a
    MuJoCo id ("HalfCheetah-v5") needs the [mujoco] extra and says so (srl.envs.mujoco).
    Otherwise a Gymnasium id (registered in `gymnasium.envs.registry`, or "module:EnvId")
    gives a `GymVectorEnv` of `gymnasium.make(name, **kwargs)` envs. Else `UnknownNameError`.

    `wrappers` (config `env_wrappers`, srl.envs.wrappers) wrap each Gymnasium env, so they need a
    Gymnasium env (an id, or the "gymnasium" factory) and the loop backend: ValueError otherwise.
    """
    kwargs = dict(kwargs or {})
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if wrappers:  # each Gymnasium env wrapped on its own, stepped by the loop backend
        for entry in wrappers:  # imported before the id is looked up: minigrid's package registers its ids
            resolve(entry.path)
        name, kwargs = _wrappable(name, kwargs, backend)
        backend = "loop"
    backend = resolve_backend(name, kwargs, backend)
    if backend == "vector":
        return NativeVectorEnv(GymVectorBackend(name, num_envs, **kwargs))
    if backend == "envpool":
        return NativeVectorEnv(EnvPoolBackend(name, num_envs, **kwargs))
    if name in registry.envs:
        factory = registry.envs.get(name)
        params = _keyword_params(factory)
        reserved = [k for k in ("num_envs", "env_index_offset", "env_id") if k in kwargs and k in params]
        if reserved:
            raise ValueError(
                f"env {name!r}: {', '.join(reserved)} set by make_vector_env; remove it from the kwargs"
            )
        if "num_envs" in params:
            extra = {"env_index_offset": env_index_offset} if "env_index_offset" in params else {}
            venv = factory(**kwargs, num_envs=num_envs, **extra)
            if not isinstance(venv, VectorEnv) or venv.num_envs != num_envs:
                raise TypeError(
                    f"env factory {name!r} was given num_envs={num_envs} and returned {venv!r}, "
                    f"not a VectorEnv of {num_envs} envs"
                )
            return venv
        envs: list[Any] = []
        for i in range(num_envs):
            extra = {"env_id": env_index_offset + i} if "env_id" in params else {}
            built = factory(**kwargs, **extra)
            if isinstance(built, VectorEnv):
                if i == 0 and built.num_envs == num_envs:
                    return built
                for env in envs + [built]:
                    env.close()
                raise TypeError(
                    f"env factory {name!r} returned a VectorEnv of {built.num_envs} envs but {num_envs} are "
                    "wanted: give the factory a num_envs parameter"
                )
            if not isinstance(built, Environment):
                raise TypeError(
                    f"env factory {name!r} returned {type(built).__name__}, not an Environment or a VectorEnv"
                )
            envs.append(built)
        return SerialVectorEnv(envs)
    if is_atari_id(name):  # before gymnasium's registry: ale-py registers these ids on import
        return _gym_vector_env([make_atari(name, **kwargs) for _ in range(num_envs)], wrappers)
    if _is_gymnasium_id(name):
        if is_mujoco_id(name):
            require_mujoco(name)
        return _gym_vector_env(make_gym_envs(name, num_envs, **kwargs), wrappers)
    close = difflib.get_close_matches(name, [*registry.envs.names(), *gym.envs.registry], n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise registry.UnknownNameError(
        f"unknown environment {name!r}: registered srl environments are "
        f"{', '.join(registry.envs.names())}, and any Gymnasium id is accepted too (e.g. 'CartPole-v1', "
        f"or 'module:EnvId'; import the package that registers it first: modules=my_pkg).{hint}"
    )


def _wrappable(name: str, kwargs: dict[str, Any], backend: str) -> tuple[str, dict[str, Any]]:
    """The Gymnasium id and kwargs behind `name` for wrapped envs; ValueError if there is none."""
    if backend not in ("auto", "loop"):
        raise ValueError(f"env_wrappers wrap each env on its own, and env_backend={backend!r} steps them all in "
                         "one call: use env_backend=loop")
    if name != "gymnasium":
        if name in registry.envs:
            raise ValueError(wrappers_need_gymnasium(name))
        return name, kwargs
    if "id" not in kwargs:
        raise ValueError("env 'gymnasium' needs env_kwargs.id (a Gymnasium id)")
    rest = dict(kwargs)
    return str(rest.pop("id")), rest


def wrappers_need_gymnasium(name: str) -> str:
    return (f"env_wrappers apply to Gymnasium envs only; env {name!r} is an srl env (vectorised or "
            "PettingZoo): wrap inside its factory instead, or name a Gymnasium id")


def _gym_vector_env(envs: list[gym.Env], wrappers: Sequence[WrapperEntry]) -> GymVectorEnv:
    try:
        return GymVectorEnv([wrap(env, wrappers) for env in envs] if wrappers else envs)
    except BaseException:
        for env in envs:
            env.close()
        raise


def describe_spaces(
    name: str, kwargs: Mapping[str, Any] | None, backend: str = "loop", wrappers: Sequence[WrapperEntry] = ()
) -> tuple[tuple[str, ...], gym.Space, gym.Space]:
    """(agents, observation_space, action_space) of env `name` inside `wrappers`, as its `VectorEnv`
    reports them (Box observations as float32, uint8 images as uint8); builds one env and closes it."""
    return describe_agents(name, kwargs, backend, wrappers)[:3]


def describe_agents(
    name: str, kwargs: Mapping[str, Any] | None, backend: str = "loop", wrappers: Sequence[WrapperEntry] = ()
) -> tuple[tuple[str, ...], gym.Space, gym.Space, dict[str, tuple[gym.Space, gym.Space]]]:
    """`describe_spaces` and each agent's own (observation, action) space (VectorEnv.agent_spaces)."""
    venv = make_vector_env(name, kwargs, num_envs=1, env_index_offset=0, backend=backend, wrappers=wrappers)
    try:
        return venv.agents, venv.observation_space, venv.action_space, venv.agent_spaces()
    finally:
        venv.close()


def is_gymnasium_env(name: str) -> bool:
    """`name` builds Gymnasium envs (a Gymnasium id, or the "gymnasium" factory), which take render_mode."""
    return name == "gymnasium" or (name not in registry.envs and _is_gymnasium_id(name))
