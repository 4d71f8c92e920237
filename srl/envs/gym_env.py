"""Gymnasium single-agent environments: a fast `GymVectorEnv` and the dict adapter `GymEnvironment`.

`GymVectorEnv` is the hot path for Gymnasium ids: it steps the gymnasium envs directly and
writes into preallocated arrays (no per-step dicts). It does its own same-step auto-reset
(calling `env.reset()` when an episode ends) and does not use gymnasium's vector autoreset.
Its steps skip the wrappers that have become pure pass-throughs and count TimeLimit's steps on
the wrapper's own counter (srl.envs.gym_passthrough); resets go through every wrapper.
Its single agent is named "agent"; rows = envs. Observation dtypes and done flags follow
`srl.envs.vector` (Box -> float32 but uint8 images stay uint8, Discrete -> int64, Dict/Tuple -> one
array per leaf; truncated = truncated and not terminated).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import TimeLimit

from srl.api.env import Environment, EnvStep, VectorEnv, VectorStep
from srl.envs.gym_passthrough import stepper
from srl.envs.vector import action_dtype, check_actions
from srl.monitor.info import EndedInfo
from srl.spaces import Obs, map_obs, obs_buffers, put_row

AGENT = "agent"
# Shimmy's envs for an env written for `gym` (not Gymnasium), the old id as env_kwargs.env_id (docs/envs.md)
SHIMMY_GYM_IDS = ("GymV26Environment-v0", "GymV21Environment-v0")
OLD_GYM_API_HINT = ("an env written for the old gym API; run it through Shimmy: modules=shimmy "
                    "env=GymV21Environment-v0 (or GymV26Environment-v0 for gym 0.26) env_kwargs.env_id=<its gym id> "
                    "(docs/envs.md, 'Old gym API envs')")


def _shimmy_kwargs(id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Shimmy's `make_kwargs` for `gym.make` with gym's own env checker off by default: gym 0.26.2
    (the last gym) checks each step with `np.bool8`, gone in NumPy 2, so every step raised
    AttributeError. Gymnasium's checker still checks the converted env."""
    if id not in SHIMMY_GYM_IDS or "env_id" not in kwargs:
        return kwargs
    return {**kwargs, "make_kwargs": {"disable_env_checker": True, **(kwargs.get("make_kwargs") or {})}}


def make_gym_envs(id: str, num_envs: int, **kwargs: Any) -> list[gym.Env]:
    """`num_envs` envs from `gymnasium.make(id, **kwargs)`. Gymnasium's env checker wraps only the
    first (the others are the same env; its wrapper costs a call on every step)."""
    kwargs = _shimmy_kwargs(id, kwargs)
    rest = {"disable_env_checker": True, **kwargs}
    return [gym.make(id, **(kwargs if i == 0 else rest)) for i in range(num_envs)]


def check_new_gym_api(env: gym.Env) -> None:
    """ValueError naming Shimmy if `env` speaks the old gym API: `reset()` takes no seed (gym 0.21).
    Without this an old env failed deep in a worker: "reset() got an unexpected keyword argument 'seed'"."""
    try:
        params = inspect.signature(env.unwrapped.reset).parameters
    except (TypeError, ValueError):
        return
    if "seed" not in params and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        raise ValueError(f"env {_env_name(env)}: reset() takes no seed: {OLD_GYM_API_HINT}")


def _env_name(env: gym.Env) -> str:
    spec = env.spec
    return repr(spec.id) if spec is not None else type(env.unwrapped).__name__


def old_step_error(env: gym.Env, error: ValueError) -> ValueError | None:
    """The error naming Shimmy if `error` is a step's 4 values (obs, reward, done, info: the old gym
    API) unpacked as Gymnasium's 5 (here or in Gymnasium's env checker), else None."""
    if "(expected 5, got 4)" not in str(error):
        return None
    return ValueError(f"env {_env_name(env)}: step() returned 4 values (obs, reward, done, info): {OLD_GYM_API_HINT}")


class GymEnvironment(Environment):
    """One gymnasium env as an `Environment` with the single agent "agent" (observations as given)."""

    def __init__(self, env: gym.Env) -> None:
        check_new_gym_api(env)
        self.env = env
        self.agents = (AGENT,)
        self.observation_spaces = {AGENT: env.observation_space}
        self.action_spaces = {AGENT: env.action_space}

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        return {AGENT: self.env.reset(seed=seed)[0]}

    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        try:
            obs, reward, terminated, truncated, info = self.env.step(actions[AGENT])
        except ValueError as e:
            old_api = old_step_error(self.env, e)
            if old_api is None:
                raise
            raise old_api from e
        return EnvStep({AGENT: obs}, {AGENT: float(reward)}, {AGENT: bool(terminated)}, {AGENT: bool(truncated)},
                       {AGENT: info})

    def close(self) -> None:
        self.env.close()


class GymVectorEnv(VectorEnv):
    """`envs` (single-agent gymnasium envs with equal spaces) as a `VectorEnv`; row i = env i.

    `reset(seed)` resets env i with seed + i; later auto-resets pass no seed, so each env's
    own random stream continues. The returned arrays are reused by the next call: copy to keep.
    """

    agents = (AGENT,)

    def __init__(self, envs: Sequence[gym.Env]) -> None:
        if len(envs) == 0:
            raise ValueError("GymVectorEnv needs at least one environment")
        self.envs = list(envs)
        obs_space, act_space = self.envs[0].observation_space, self.envs[0].action_space
        check_new_gym_api(self.envs[0])
        for i, env in enumerate(self.envs):
            if env.observation_space != obs_space or env.action_space != act_space:
                raise ValueError(
                    f"GymVectorEnv needs equal spaces in every env: env 0 has observation space "
                    f"{obs_space} and action space {act_space}, env {i} has {env.observation_space} "
                    f"and {env.action_space}"
                )
        self._obs_space = obs_space  # as the envs give their observations
        self.action_space = act_space
        self.num_envs = n = len(self.envs)
        self._discrete_actions = isinstance(act_space, gym.spaces.Discrete)
        # a dtype object: astype() given Discrete's dtype (the class np.int64) converts it on every step
        self._discrete_dtype = np.dtype(act_space.dtype) if self._discrete_actions else None
        self._action_dtype = action_dtype(act_space)
        self._obs, self.observation_space = obs_buffers(obs_space, n)
        self._one_array = isinstance(self._obs, np.ndarray)  # else a dict: one array per leaf
        self._reward = np.zeros(n, dtype=np.float32)
        self._terminated = np.zeros(n, dtype=bool)
        self._truncated = np.zeros(n, dtype=bool)
        self._result = VectorStep(self._obs, self._reward, self._terminated, self._truncated)
        # per env: the first wrapper layer a step must call, and the TimeLimit it counts for
        self._steps: list[Callable[[Any], tuple]] = []
        self._time_limits: list[TimeLimit | None] = []
        self._steppers_settled = False

    @classmethod
    def make(cls, id: str, num_envs: int, **kwargs: Any) -> GymVectorEnv:
        """`num_envs` envs from `gymnasium.make(id, **kwargs)` (make_gym_envs)."""
        return cls(make_gym_envs(id, num_envs, **kwargs))

    def reset(self, seed: int | None = None) -> Obs:
        obs = self._obs
        for i, env in enumerate(self.envs):
            put_row(obs, self._obs_space, i, env.reset(seed=None if seed is None else seed + i)[0])
        self._reward[:] = 0.0
        self._terminated[:] = False
        self._truncated[:] = False
        return obs

    def reset_env(self, index: int) -> Obs:
        put_row(self._obs, self._obs_space, index, self.envs[index].reset()[0])
        return map_obs(lambda a: a[index : index + 1], self._obs)

    def watch_info(self, keys: tuple[str, ...]) -> None:
        self.ended_info = EndedInfo(keys, self.num_envs) if keys else None

    def _find_steppers(self) -> None:
        steppers = [stepper(env) for env in self.envs]
        self._steps = [s.step for s in steppers]
        self._time_limits = [s.time_limit for s in steppers]
        self._steppers_settled = all(s.settled for s in steppers)

    def step(self, actions: np.ndarray) -> VectorStep:
        acts = check_actions(actions, self.num_envs, discrete=False, dtype=self._action_dtype)
        if self._discrete_actions:
            # numpy scalars of the space's dtype, as `action_space.sample()` gives: gymnasium's
            # `Discrete.contains` checks them faster than Python ints (no np.iinfo per call)
            acts = list(acts.reshape(self.num_envs).astype(self._discrete_dtype, copy=False))
        if not self._steppers_settled:  # until every env's wrappers are known to pass through
            self._find_steppers()
        observations: list[Any] = []
        rewards: list[Any] = []
        ends = []  # (row, terminated, truncated) of the few envs whose episode ended
        ended_info = self.ended_info
        if ended_info is not None:
            ended_info.clear()
        for step, limit, action in zip(self._steps, self._time_limits, acts):
            try:
                o, r, te, tr, info = step(action)
            except ValueError as e:
                old_api = old_step_error(self.envs[len(observations)], e)  # this env's row: len(observations)
                if old_api is None:
                    raise
                raise old_api from e
            if limit is not None:  # what TimeLimit.step does, on its own counter
                elapsed = limit._elapsed_steps + 1  # type: ignore[operator]  # gymnasium types it None until reset
                limit._elapsed_steps = elapsed  # type: ignore[assignment]
                if elapsed >= limit._max_episode_steps:
                    tr = True
            if te or tr:
                row = len(observations)
                ends.append((row, te, tr))
                if ended_info is not None:
                    ended_info.put(row, info)
                o = self.envs[row].reset()[0]  # the whole chain: TimeLimit zeroes its counter
            observations.append(o)
            rewards.append(r)
        # One bulk write per array is cheaper than writing row by row.
        if self._one_array:
            self._obs[:] = observations  # type: ignore[index, assignment]  # _one_array: one ndarray
        else:
            for row, o in enumerate(observations):
                put_row(self._obs, self._obs_space, row, o)
        self._reward[:] = rewards
        terminated, truncated = self._terminated, self._truncated
        terminated.fill(False)
        truncated.fill(False)
        for row, te, tr in ends:
            terminated[row] = te
            truncated[row] = tr and not te
        return self._result

    def close(self) -> None:
        for env in self.envs:
            env.close()
