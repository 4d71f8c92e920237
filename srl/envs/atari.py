"""Atari ids (`ALE/Pong-v5`, ...) with the standard preprocessing, from ale-py.

Each env is `gymnasium.make(id, frameskip=1)` wrapped in `gymnasium.wrappers.AtariPreprocessing`:
up to 30 no-op actions at reset, 4 frames per agent step (max-pooled over the last two), 84x84
grayscale observations; `frame_stack=K` (default 1) stacks the last K frames into [K, 84, 84]
(gymnasium.wrappers.FrameStackObservation), as Atari PPO/DQN setups do. The v5 ids keep their own defaults otherwise (sticky actions with
probability 0.25, full action set off). Keyword arguments go to `gymnasium.make`, except the
preprocessing ones below. Needs the `[atari]` extra (ale-py, opencv-python-headless).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

PREPROCESSING = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "grayscale_obs": True}
INSTALL_HINT = "Atari envs need srl's [atari] extra: pip install 'srl[atari]' (ale-py and opencv-python-headless)"


def is_atari_id(name: str) -> bool:
    return name.startswith("ALE/")


def register_atari() -> None:
    """Register ale-py's ids with gymnasium, or say which extra is missing."""
    try:
        import ale_py
    except ImportError as error:
        raise ImportError(f"{INSTALL_HINT}; importing ale_py failed: {error}") from error
    gym.register_envs(ale_py)


def make_atari(id: str, **kwargs: Any) -> gym.Env:
    """One preprocessed Atari env; kwargs named in PREPROCESSING override its settings."""
    register_atari()
    preprocessing = {k: kwargs.pop(k, v) for k, v in PREPROCESSING.items()}
    frame_stack = int(kwargs.pop("frame_stack", 1))
    if frame_stack < 1:
        raise ValueError(f"frame_stack must be >= 1, got {frame_stack}")
    env = gym.make(id, frameskip=1, **kwargs)  # the wrapper skips frames (and max-pools them)
    try:
        env = gym.wrappers.AtariPreprocessing(env, **preprocessing)
    except gym.error.DependencyNotInstalled as error:
        env.close()
        raise ImportError(f"{INSTALL_HINT}; {error}") from error
    return gym.wrappers.FrameStackObservation(env, frame_stack) if frame_stack > 1 else env
