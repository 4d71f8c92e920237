"""`BatchedTorchEnv`: thousands of environments stepped as one torch program, on CPU or GPU.

An environment here is not a Python object per instance but a set of state tensors whose first
axis is the environment index; one `step` advances every environment with a handful of
elementwise tensor ops, so the cost per step is (almost) independent of `num_envs` until the
device saturates. This is the "pod" style of ElegantRL's podracer / Isaac Gym: env, policy and
trainer can then share one device with no copies (see `srl.workers.pod`).

Contract (the same as `srl.api.env.VectorEnv`, with torch tensors instead of numpy arrays):

* rows are env-major: row = env_index * num_agents + agent_index;
* `reset(seed)` -> obs [rows, *obs_shape] float32;
* `step(actions [rows, ...])` -> (obs [rows, ...] float32, reward [rows] float32,
  terminated [rows] bool, truncated [rows] bool), all on `device`;
* same-step auto-reset: a row whose episode ended on this step reports the final reward and
  flags and already holds the next episode's first observation;
* every env counts its own steps; when the count reaches `max_episode_steps` the episode is
  truncated (truncated = time limit and not terminated: a row is never both);
* the returned tensors are buffers owned by the env and overwritten by the next call (copy
  what you keep). They are ordinary tensors (not inference tensors), so they can be copied into
  buffers that later take part in autograd.

Randomness (initial states) comes from one `torch.Generator` on the env's device: `reset(seed)`
seeds it, so a seed gives the same episodes on the same device and dtype. The environments of a
batch are not seeded one by one (the actor already gives each group of envs its own seed).

Auto-reset: on CPU, the ended envs are found with one `done.any()` / `nonzero()` and only they
draw new initial states; on other devices (where reading `done` on the host would synchronise
every step) every env draws a candidate initial state each step and `torch.where` keeps it only
for the ended ones, so `step` never waits for the device.

Subclasses define the spaces, `_state_tensors`, `_sample_initial`, `_advance` and `_observe`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, TypedDict

import gymnasium as gym
import numpy as np
import torch

from srl.api.env import VectorEnv, VectorStep
from srl.envs.vector import check_actions

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """torch.float32 / torch.float64 from a dtype or its name ("float32", "float64")."""
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise ValueError(f"batched envs compute in 'float32' or 'float64', got {dtype!r}")
    return _DTYPES[name]


class TensorKw(TypedDict):
    """`**kw` of a torch factory: the env's device and dtype (`BatchedTorchEnv.tensor_kw`)."""

    device: torch.device
    dtype: torch.dtype


class BatchedTorchEnv(ABC):
    """`num_envs` environments x `agents` as state tensors on `device`; see the module doc.

    `dtype` is the precision of the physical state and of the dynamics (float32 by default;
    float64 reproduces the float64 Gymnasium originals to rounding). Observations and rewards
    are float32 either way.
    """

    agents: tuple[str, ...] = ("agent",)
    observation_space: gym.spaces.Box  # one agent's, float32
    action_space: gym.Space  # one agent's
    default_max_episode_steps: int = 0

    def __init__(
        self,
        num_envs: int,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | str = torch.float32,
        seed: int | None = None,
        max_episode_steps: int | None = None,
    ) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            # "cuda" is the current device: named by its index, as the policy's parameters are
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.dtype = as_dtype(dtype)
        limit = self.default_max_episode_steps if max_episode_steps is None else int(max_episode_steps)
        if limit < 1:
            raise ValueError(f"max_episode_steps must be >= 1, got {limit}")
        self.max_episode_steps = limit
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(0 if seed is None else int(seed))
        # Dense (sync-free) auto-reset off the CPU; sparse (only the ended envs) on the CPU.
        self.sync_free_reset = self.device.type != "cpu"
        rows = self.num_rows
        with torch.inference_mode(False):  # ordinary tensors even if built under inference_mode
            self.elapsed = torch.zeros(self.num_envs, dtype=torch.int32, device=self.device)
            self._env_reward = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
            self._env_terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            self._env_truncated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            self._done = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            self._one = torch.tensor(1, dtype=torch.int32, device=self.device)
            self._limit = torch.tensor(self.max_episode_steps, dtype=torch.int32, device=self.device)
            if self.num_agents == 1:  # rows = envs: the env-level buffers are the row buffers
                self._reward, self._terminated, self._truncated = self._env_reward, self._env_terminated, self._env_truncated
            else:
                self._reward = torch.zeros(rows, dtype=torch.float32, device=self.device)
                self._terminated = torch.zeros(rows, dtype=torch.bool, device=self.device)
                self._truncated = torch.zeros(rows, dtype=torch.bool, device=self.device)
            obs_shape = self.observation_space.shape
            self._obs = torch.zeros(rows, *obs_shape, dtype=torch.float32, device=self.device)
            self._build_state()

    # -- sizes ------------------------------------------------------------------------------------

    @property
    def num_agents(self) -> int:
        return len(self.agents)

    @property
    def num_rows(self) -> int:
        return self.num_envs * self.num_agents

    @property
    def tensor_kw(self) -> TensorKw:
        """`torch.zeros(n, **self.tensor_kw)`: a tensor on the state's device, in its dtype."""
        return {"device": self.device, "dtype": self.dtype}

    # -- what subclasses implement ----------------------------------------------------------------

    @abstractmethod
    def _build_state(self) -> None:
        """Allocate the state tensors (each [num_envs, ...] on `device`, in `dtype`)."""

    @abstractmethod
    def _state_tensors(self) -> list[torch.Tensor]:
        """The state tensors, each [num_envs, ...]; auto-reset overwrites their ended rows."""

    @abstractmethod
    def _sample_initial(self, n: int) -> list[torch.Tensor]:
        """n initial states drawn with `self.generator`, one tensor per state tensor, each [n, ...]."""

    @abstractmethod
    def _advance(self, actions: torch.Tensor) -> None:
        """Advance every env one step with `actions` (as `_prepare_actions` returns them); write
        the per-env reward into `self._env_reward` and termination into `self._env_terminated`."""

    @abstractmethod
    def _observe(self) -> torch.Tensor:
        """Write the current observations into `self._obs` [rows, ...] and return it."""

    def _prepare_actions(self, actions: Any) -> torch.Tensor:
        """actions [rows, ...] (tensor or array) -> a tensor on `device` in the form `_advance` wants."""
        actions = torch.as_tensor(actions, device=self.device)
        if actions.shape[:1] != (self.num_rows,):
            raise ValueError(
                f"expected actions shaped [{self.num_rows}, ...] (one per row), got {tuple(actions.shape)}"
            )
        return actions

    # -- the contract -----------------------------------------------------------------------------

    @torch.inference_mode()
    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Start a new episode in every env (seeding the generator with `seed` if given); obs [rows, ...]."""
        if seed is not None:
            self.generator.manual_seed(int(seed))
        for state, new in zip(self._state_tensors(), self._sample_initial(self.num_envs)):
            state.copy_(new)
        self.elapsed.zero_()
        for buf in (self._reward, self._terminated, self._truncated):
            buf.zero_()
        return self._observe()

    @torch.inference_mode()
    def step(self, actions: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step every env; (obs, reward, terminated, truncated) over rows, env-owned buffers."""
        self._advance(self._prepare_actions(actions))
        terminated, truncated, done = self._env_terminated, self._env_truncated, self._done
        self.elapsed.add_(self._one)
        torch.ge(self.elapsed, self._limit, out=truncated)
        torch.gt(truncated, terminated, out=truncated)  # the time limit and not terminated
        torch.logical_or(terminated, truncated, out=done)
        self._auto_reset(done)
        if self.num_agents > 1:
            self._expand_to_rows()
        return self._observe(), self._reward, self._terminated, self._truncated

    def close(self) -> None:
        """Nothing to release (the tensors go with the object)."""

    # -- helpers ----------------------------------------------------------------------------------

    def _auto_reset(self, done: torch.Tensor) -> None:
        if self.sync_free_reset:
            mask = done
            for state, new in zip(self._state_tensors(), self._sample_initial(self.num_envs)):
                state.copy_(torch.where(mask.view(-1, *([1] * (state.dim() - 1))), new, state))
            self.elapsed.masked_fill_(mask, 0)
        else:
            index = done.nonzero().squeeze(1)
            if index.numel() == 0:
                return
            for state, new in zip(self._state_tensors(), self._sample_initial(index.numel())):
                state.index_copy_(0, index, new)
            self.elapsed.masked_fill_(done, 0)

    def _expand_to_rows(self) -> None:
        """Copy the per-env reward and flags to each of the env's agent rows."""
        shape = (self.num_envs, self.num_agents)
        self._reward.view(shape).copy_(self._env_reward.unsqueeze(1).expand(shape))
        self._terminated.view(shape).copy_(self._env_terminated.unsqueeze(1).expand(shape))
        self._truncated.view(shape).copy_(self._env_truncated.unsqueeze(1).expand(shape))

    def _uniform(
        self, shape: tuple[int, ...], low: float | torch.Tensor, high: float | torch.Tensor
    ) -> torch.Tensor:
        """Uniform [low, high) samples in `dtype` drawn with the env's generator."""
        u = torch.rand(shape, generator=self.generator, device=self.device, dtype=self.dtype)
        return u.mul_(high - low).add_(low)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_envs={self.num_envs}, agents={len(self.agents)}, "
            f"device={self.device}, dtype={self.dtype}, max_episode_steps={self.max_episode_steps})"
        )


class TorchVectorEnv(VectorEnv):
    """A `BatchedTorchEnv` as a numpy `VectorEnv`, for the ordinary actor workers.

    Actions arrive as numpy arrays [rows, ...] and go to the env's device; the env's tensors come
    back as numpy arrays (zero-copy views on the CPU, one device-to-host copy each otherwise).
    As with every `VectorEnv`, the returned arrays are overwritten by the next call.
    `reset(seed)` seeds the batch's one generator with `seed` (not env i with seed + i).
    """

    def __init__(self, env: BatchedTorchEnv, env_index_offset: int = 0) -> None:
        self.env = env
        self.env_index_offset = int(env_index_offset)  # where this batch sits in the run (informational)
        self.num_envs = env.num_envs
        self.agents = tuple(env.agents)
        self.observation_space = env.observation_space
        self.action_space = env.action_space
        self._discrete = isinstance(env.action_space, gym.spaces.Discrete)
        self._box = isinstance(env.action_space, gym.spaces.Box)
        self._on_cpu = env.device.type == "cpu"

    def _numpy(self, tensor: torch.Tensor) -> np.ndarray:
        return tensor.numpy() if self._on_cpu else tensor.cpu().numpy()

    def reset(self, seed: int | None = None) -> np.ndarray:
        return self._numpy(self.env.reset(seed))

    def step(self, actions: np.ndarray) -> VectorStep:
        actions = check_actions(actions, self.num_rows, discrete=False)
        if self._discrete:
            actions = actions.reshape(self.num_rows).astype(np.int64, copy=False)
        elif self._box:  # MultiDiscrete / MultiBinary stay integers
            actions = actions.astype(np.float32, copy=False)
        obs, reward, terminated, truncated = self.env.step(torch.from_numpy(np.ascontiguousarray(actions)))
        numpy = self._numpy
        return VectorStep(numpy(obs), numpy(reward), numpy(terminated), numpy(truncated))

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"TorchVectorEnv({self.env!r})"
