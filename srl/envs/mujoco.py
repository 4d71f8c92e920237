"""MuJoCo ids (`HalfCheetah-v5`, `Hopper-v5`, ...): Gymnasium's own envs, which need the mujoco package.

Nothing here wraps the envs: they are plain Gymnasium ids and go through `GymVectorEnv`. This
module only tells them apart, so that a missing `mujoco` says which srl extra installs it instead
of Gymnasium's generic DependencyNotInstalled deep inside a worker.
"""

from __future__ import annotations

import importlib.util

import gymnasium as gym

INSTALL_HINT = "MuJoCo envs need srl's [mujoco] extra: pip install 'srl[mujoco]' (gymnasium[mujoco], mujoco)"


def is_mujoco_id(name: str) -> bool:
    """A Gymnasium id whose env class lives in gymnasium.envs.mujoco."""
    spec = gym.envs.registry.get(name)
    entry = getattr(spec, "entry_point", None)
    return isinstance(entry, str) and entry.startswith("gymnasium.envs.mujoco")


def mujoco_installed() -> bool:
    return importlib.util.find_spec("mujoco") is not None


def require_mujoco(name: str) -> None:
    if not mujoco_installed():
        raise ImportError(f"env {name!r}: {INSTALL_HINT}")
