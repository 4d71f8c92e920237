"""Environments written as batched torch programs: thousands of envs stepped in one call.

    from srl.envs.batched import BatchedCartPole, make_batched_env
    env = BatchedCartPole(4096, device="cuda")            # a BatchedTorchEnv (torch in, torch out)
    obs = env.reset(seed=1)
    obs, reward, terminated, truncated = env.step(actions)

    venv = srl.envs.make_vector_env("batched-cartpole", {}, num_envs=64)   # numpy VectorEnv

Importing this package registers, in `srl.api.registry`, the env factories "batched-cartpole"
(Gymnasium CartPole-v1), "batched-pendulum" (Pendulum-v1) and "batched-spread" (a cooperative
multi-agent particle task), each
`(num_envs, env_index_offset=0, device="cpu", seed=None, dtype="float32", max_episode_steps=None,
**env_kwargs) -> TorchVectorEnv`, the adapter that the ordinary actor workers step. The pod
kernel (`srl.workers.pod`) uses the `BatchedTorchEnv` itself: `make_batched_env(name, ...)`.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from srl.api import registry
from srl.envs.batched.base import BatchedTorchEnv, TorchVectorEnv
from srl.envs.batched.cartpole import BatchedCartPole
from srl.envs.batched.pendulum import BatchedPendulum
from srl.envs.batched.spread import BatchedSpread

__all__ = [
    "BATCHED_ENVS",
    "BatchedCartPole",
    "BatchedPendulum",
    "BatchedSpread",
    "BatchedTorchEnv",
    "TorchVectorEnv",
    "make_batched_env",
]

BATCHED_ENVS: dict[str, type[BatchedTorchEnv]] = {
    "batched-cartpole": BatchedCartPole,
    "batched-pendulum": BatchedPendulum,
    "batched-spread": BatchedSpread,
}


def make_batched_env(
    name: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    dtype: torch.dtype | str = "float32",
    max_episode_steps: int | None = None,
    **env_kwargs: Any,
) -> BatchedTorchEnv:
    """The `BatchedTorchEnv` registered as `name` (a key of `BATCHED_ENVS`)."""
    if name not in BATCHED_ENVS:
        raise registry.UnknownNameError(
            f"unknown batched env {name!r}; batched envs are {', '.join(sorted(BATCHED_ENVS))}"
        )
    return BATCHED_ENVS[name](
        num_envs, device=device, dtype=dtype, seed=seed, max_episode_steps=max_episode_steps, **env_kwargs
    )


def make_torch_vector_env(
    name: str,
    num_envs: int,
    env_index_offset: int = 0,
    device: str = "cpu",
    seed: int | None = None,
    dtype: str = "float32",
    max_episode_steps: int | None = None,
    **env_kwargs: Any,
) -> TorchVectorEnv:
    """The batched env `name` of `num_envs` envs as a numpy `TorchVectorEnv`: the factory registered as
    `name` (`env_index_offset` is recorded, the reset seed decides the episodes)."""
    env = make_batched_env(name, num_envs, device, seed, dtype, max_episode_steps, **env_kwargs)
    return TorchVectorEnv(env, env_index_offset)


for _name in BATCHED_ENVS:
    registry.register_env(_name)(functools.partial(make_torch_vector_env, _name))
