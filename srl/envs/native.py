"""Natively batched environments (Gymnasium vector entry points, EnvPool) as one `VectorEnv`.

A `SerialVectorEnv`/`GymVectorEnv` steps its envs in a Python loop; a native backend steps the
whole group in one call (Gymnasium's `CartPoleVectorEnv` in numpy, EnvPool in C++ threads).

Both backends auto-reset *next-step* (Gymnasium 1.x's default, and EnvPool's): the step on which
an episode ends returns its last observation, and the *following* step ignores that env's action
and returns the next episode's first observation with reward 0 and no done flag. srl's
`VectorEnv` contract is *same-step*: the ending step already returns the next episode's first
observation, and every step is a real transition. `NativeVectorEnv` converts: after each step it
resets just the envs that ended (a partial reset), writes their first observations into the
returned rows, and so the backend never sees a done env on its next step (no dead transition,
none lost or duplicated; tests/test_native_envs.py counts them).

A backend is any object with `step(actions) -> (obs, reward, terminated, truncated, info)`,
`reset(seed) -> obs` and `reset_rows(mask) -> obs of the masked envs`, and `close()`.
"""

from __future__ import annotations

from typing import Protocol

import gymnasium as gym
import numpy as np

from srl.api.env import VectorEnv, VectorStep
from srl.envs.vector import check_actions, obs_array_spec


class NextStepBackend(Protocol):
    num_envs: int
    observation_space: gym.Space  # of one env
    action_space: gym.Space  # of one env

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...

    def reset(self, seed: int | None) -> np.ndarray: ...

    def reset_rows(self, mask: np.ndarray) -> np.ndarray: ...

    def close(self) -> None: ...


class NativeVectorEnv(VectorEnv):
    """A next-step backend as a same-step `VectorEnv` with the single agent "agent"; rows = envs.
    Observations follow `srl.envs.vector` (Box -> float32, uint8 images stay uint8); the returned
    arrays are reused."""

    agents = ("agent",)

    def __init__(self, backend: NextStepBackend) -> None:
        self.backend = backend
        self.num_envs = n = backend.num_envs
        shape, dtype, self.observation_space = obs_array_spec(backend.observation_space)
        self.action_space = backend.action_space
        self._discrete = isinstance(self.action_space, gym.spaces.Discrete)
        self._action_dtype = self.action_space.dtype
        self._obs = np.zeros((n, *shape), dtype=dtype)
        self._reward = np.zeros(n, dtype=np.float32)
        self._terminated = np.zeros(n, dtype=bool)
        self._truncated = np.zeros(n, dtype=bool)
        self._result = VectorStep(self._obs, self._reward, self._terminated, self._truncated)

    def reset(self, seed: int | None = None) -> np.ndarray:
        self._obs[:] = self.backend.reset(seed).reshape(self._obs.shape)
        self._reward.fill(0.0)
        self._terminated.fill(False)
        self._truncated.fill(False)
        return self._obs

    def step(self, actions: np.ndarray) -> VectorStep:
        acts = check_actions(actions, self.num_envs, discrete=False)
        if self._discrete:
            acts = acts.reshape(self.num_envs).astype(self._action_dtype, copy=False)
        obs, reward, terminated, truncated = self.backend.step(acts)
        self._obs[:] = obs.reshape(self._obs.shape)
        self._reward[:] = reward
        self._terminated[:] = terminated
        np.logical_and(truncated, ~self._terminated, out=self._truncated)  # never both
        ended = self._terminated | self._truncated
        if ended.any():  # the next episode's first observations, on the step the last one ended
            self._obs[ended] = self.backend.reset_rows(ended).reshape(-1, *self._obs.shape[1:])
        return self._result

    def reset_env(self, index: int) -> np.ndarray:
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[index] = True
        self._obs[index] = self.backend.reset_rows(mask).reshape(self._obs.shape[1:])
        return self._obs[index : index + 1]

    def close(self) -> None:
        self.backend.close()
