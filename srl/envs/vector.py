"""`SerialVectorEnv`: a list of `Environment`s stepped one after another as one `VectorEnv`.

Rows are env-major: row = env_index * num_agents + agent_index. Every agent of every env must
share one action space, and one observation space, except that agents' 1-D Boxes of different
lengths are zero-padded to the longest (`agent_spaces` keeps each agent's own: a run maps such
agents to policies of their own, srl.graph.lanes).

Observation arrays: Box observations are stored as float32 (the reported `observation_space`
is the float32 version of the env's Box), except uint8 Boxes (images), which stay uint8 (policies
convert their input); Discrete observations as int64 scalars per row;
MultiDiscrete / MultiBinary keep their space's dtype. Dict and Tuple observations (nested too)
are held as one such array per leaf, a dict leaf path -> array (srl.spaces); Text, Graph and
Sequence spaces are refused with `srl.spaces.UnsupportedSpace`.

Done flags per row (the rules every `VectorEnv` in `srl.envs` follows):

* terminated[row] = that agent reported terminated on this step;
* truncated[row] = that agent reported truncated and not terminated on this step (a row is
  never both);
* an env's episode is over once every agent has reported terminated or truncated on this step
  or an earlier step of the episode (agents may finish at different steps). On the step it is
  over, every row of that env is done: a row whose agent reports neither flag on that step
  (because it finished earlier and the env does not repeat its flag) is marked truncated.
  That same step returns the next episode's first observations (same-step auto-reset).

An agent that finished earlier than others keeps its last observation in its row (unless the
env keeps sending one) and gets reward 0 when the env reports none for it.

The arrays of a returned `VectorStep` (and the array `reset` returns) are preallocated once
and overwritten by the next `step` / `reset`: the caller copies what it keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from srl.api.env import Environment, VectorEnv, VectorStep
from srl.monitor.info import EndedInfo
from srl.spaces import Obs, is_composite, leaf_array_spec, map_obs, obs_buffers, put_row, reported_space


def obs_array_spec(space: gym.Space) -> tuple[tuple[int, ...], np.dtype, gym.Space]:
    """(per-row shape, dtype, reported space) of the one array holding observations of `space`
    (a Dict or Tuple space takes one array per leaf: `srl.spaces.obs_buffers`)."""
    if is_composite(space):
        raise ValueError(
            f"observation space {space} is not one array: natively batched envs (env_backend=vector or "
            "envpool) take Box, Discrete, MultiDiscrete or MultiBinary observations; env_backend=loop takes "
            "Dict and Tuple ones"
        )
    return leaf_array_spec(space)


def check_actions(actions: Any, num_rows: int, discrete: bool, dtype: np.dtype | None = None) -> Any:
    """Validate actions [rows, ...]; Discrete actions come back as a list of Python ints, others
    as an array, cast to `dtype` if given (see `action_dtype`)."""
    actions = np.asarray(actions)
    if actions.shape[:1] != (num_rows,):
        raise ValueError(f"expected actions shaped [{num_rows}, ...] (one per row), got {actions.shape}")
    if discrete:
        return actions.reshape(num_rows).tolist()
    return actions if dtype is None else actions.astype(dtype, copy=False)


def action_dtype(space: gym.Space) -> np.dtype | None:
    """The dtype an env gets MultiDiscrete / MultiBinary actions in (the space's: int64, int8),
    which srl carries as int64 (srl.graph.space_spec); None for other spaces (passed as they are)."""
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return np.dtype(space.dtype)
    return None


def shared_spaces(envs: Sequence[Any], agents: tuple[str, ...]) -> tuple[gym.Space, gym.Space]:
    """The one observation space and one action space that every agent of every env shares (1-D
    Boxes of different lengths: a Box of the longest, see the module doc)."""
    first = envs[0]
    obs_space = _padded(agents, first.observation_spaces) or first.observation_spaces[agents[0]]
    act_space = first.action_spaces[agents[0]]
    for i, env in enumerate(envs):
        for agent in agents:
            o, a = env.observation_spaces[agent], env.action_spaces[agent]
            if o != obs_space and _padded(agents, env.observation_spaces) != obs_space:
                raise ValueError(
                    "SerialVectorEnv needs all agents to share one observation space: agent "
                    f"{agents[0]!r} of env 0 has {obs_space} but agent {agent!r} of env {i} has {o}"
                )
            if a != act_space:
                raise ValueError(
                    "SerialVectorEnv needs all agents to share one action space: agent "
                    f"{agents[0]!r} of env 0 has {act_space} but agent {agent!r} of env {i} has {a}"
                )
    return obs_space, act_space


def _padded(agents: tuple[str, ...], spaces: Any) -> gym.spaces.Box | None:
    """A float32 Box as long as the longest of agents' 1-D Boxes, where their lengths differ."""
    own = [spaces[a] for a in agents]
    if not all(isinstance(s, gym.spaces.Box) and len(s.shape) == 1 and s.dtype != np.uint8 for s in own):
        return None
    if len({s.shape for s in own}) == 1:
        return None
    return gym.spaces.Box(-np.inf, np.inf, (max(s.shape[0] for s in own),), np.float32)


class SerialVectorEnv(VectorEnv):
    """Steps `envs` (all with the same agents and spaces) serially; see the module doc for rows,
    dtypes and done flags. Env i is reset with seed + i by `reset(seed)`."""

    def __init__(self, envs: Sequence[Environment]) -> None:
        if len(envs) == 0:
            raise ValueError("SerialVectorEnv needs at least one environment")
        self.envs = list(envs)
        self.agents = tuple(self.envs[0].agents)
        if not self.agents:
            raise ValueError("SerialVectorEnv: the environments have no agents")
        for i, env in enumerate(self.envs):
            if tuple(env.agents) != self.agents:
                raise ValueError(
                    f"SerialVectorEnv needs the same agents in every env: env 0 has {self.agents}, "
                    f"env {i} has {tuple(env.agents)}"
                )
        obs_space, self.action_space = shared_spaces(self.envs, self.agents)
        self._obs_space = obs_space  # as the envs give their observations
        self.num_envs = len(self.envs)
        self._num_agents = len(self.agents)
        self._discrete_actions = isinstance(self.action_space, gym.spaces.Discrete)
        self._action_dtype = action_dtype(self.action_space)
        rows = self.num_envs * self._num_agents
        self._obs, self.observation_space = obs_buffers(obs_space, rows)
        first = self.envs[0]
        self._own = {a: (reported_space(first.observation_spaces[a]), first.action_spaces[a]) for a in self.agents}
        # each agent's own length where rows are padded (see _padded); None where every agent fills its row
        padded = _padded(self.agents, first.observation_spaces) is not None
        self._lengths = [gym.spaces.flatdim(o) for o, _ in self._own.values()] if padded else None
        self._reward = np.zeros(rows, dtype=np.float32)
        self._terminated = np.zeros(rows, dtype=bool)
        self._truncated = np.zeros(rows, dtype=bool)
        self._finished = np.zeros((self.num_envs, self._num_agents), dtype=bool)
        self._result = VectorStep(self._obs, self._reward, self._terminated, self._truncated)

    def watch_info(self, keys: tuple[str, ...]) -> None:
        self.ended_info = EndedInfo(keys, self.num_rows) if keys else None

    def _write_reset(self, e: int, obs: dict[str, Any]) -> None:
        base = e * self._num_agents
        for j, agent in enumerate(self.agents):
            if agent not in obs:
                raise ValueError(
                    f"env {e} ({type(self.envs[e]).__name__}).reset() returned no observation "
                    f"for agent {agent!r}"
                )
            self._put(self._obs, base + j, j, obs[agent])
        self._finished[e] = False

    def _put(self, obs: Obs, row: int, agent: int, value: Any) -> None:
        if self._lengths is None or not isinstance(obs, np.ndarray):
            put_row(obs, self._obs_space, row, value)
        else:  # a padded Box (1-D): the agent's own length, the rest stays zero
            obs[row, : self._lengths[agent]] = value

    def agent_spaces(self) -> dict[str, tuple[gym.Space, gym.Space]]:
        return dict(self._own)

    def reset(self, seed: int | None = None) -> Obs:
        for e, env in enumerate(self.envs):
            self._write_reset(e, env.reset(seed=None if seed is None else seed + e))
        self._reward[:] = 0.0
        self._terminated[:] = False
        self._truncated[:] = False
        return self._obs

    def reset_env(self, index: int) -> Obs:
        self._write_reset(index, self.envs[index].reset())
        rows = slice(index * self._num_agents, (index + 1) * self._num_agents)
        return map_obs(lambda a: a[rows], self._obs)

    def step(self, actions: np.ndarray) -> VectorStep:
        na = self._num_agents
        acts = check_actions(actions, self.num_envs * na, self._discrete_actions, self._action_dtype)
        obs, reward, term, trunc = self._obs, self._reward, self._terminated, self._truncated
        agents = self.agents
        ended_info = self.ended_info
        if ended_info is not None:
            ended_info.clear()
        for e, env in enumerate(self.envs):
            base = e * na
            st = env.step({agent: acts[base + j] for j, agent in enumerate(agents)})
            finished = self._finished[e]
            reported = [False] * na
            for j, agent in enumerate(agents):
                row = base + j
                te = bool(st.terminated.get(agent, False))
                tr = bool(st.truncated.get(agent, False)) and not te
                o = st.obs.get(agent)
                if o is not None:
                    self._put(obs, row, j, o)
                elif not finished[j] and not (te or tr):
                    raise ValueError(
                        f"env {e} ({type(env).__name__}).step() returned no observation for "
                        f"agent {agent!r}, which has not finished its episode"
                    )
                reward[row] = st.reward.get(agent, 0.0)
                term[row] = te
                trunc[row] = tr
                reported[j] = te or tr
                if ended_info is not None and (te or tr):
                    ended_info.put(row, st.info.get(agent))
            finished |= reported
            if finished.all():
                for j in range(na):
                    if not reported[j]:
                        trunc[base + j] = True
                self._write_reset(e, env.reset())
        return self._result

    def close(self) -> None:
        for env in self.envs:
            env.close()
