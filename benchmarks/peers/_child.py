"""Helpers for the scripts that run inside a peer's virtualenv (stdlib only, no srl).

The env work is the same everywhere: "cartpole" is CartPole-v1; "pong" is ALE/Pong-v5 with
frameskip=1 under gymnasium's AtariPreprocessing (up to 30 no-ops at reset, 4 frames per agent
step, 84x84 grayscale), as srl.envs.atari builds it. Env steps are agent steps.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

ATARI_PREPROCESSING = {"noop_max": 30, "frame_skip": 4, "screen_size": 84, "grayscale_obs": True}


def make_env(name: str, channel_last: bool = False, channel_first: bool = False, frame_stack: int = 1,
             scaled_float: bool = False) -> Any:
    """One gymnasium env for `name`. Pong's frames get a channel axis (last or first) holding the
    newest `frame_stack` frames, as srl's pong-ppo sees them (4); `scaled_float` gives float32 in
    [0, 1] instead of uint8, for a network that does not scale its input itself (RLlib's)."""
    import gymnasium as gym

    if name == "cartpole":
        return gym.make("CartPole-v1")
    if name != "pong":
        raise SystemExit(f"unknown env {name!r}: cartpole or pong")
    import ale_py

    gym.register_envs(ale_py)
    env = gym.wrappers.AtariPreprocessing(gym.make("ALE/Pong-v5", frameskip=1), **ATARI_PREPROCESSING)
    if channel_last or channel_first:
        return _stacked(env, frame_stack, last=channel_last, scaled_float=scaled_float)
    return env


def _stacked(env: Any, frames: int, last: bool, scaled_float: bool) -> Any:
    """84x84 frames as 84x84xK or Kx84x84, the newest K (the first frame repeated after a reset);
    written here because gymnasium 0.29 (Sample Factory's) and 1.x name their wrappers differently."""
    from collections import deque

    import gymnasium as gym
    import numpy as np

    class StackedFrames(gym.Wrapper):
        def __init__(self, inner: Any) -> None:
            super().__init__(inner)
            self.frames: deque = deque(maxlen=frames)
            shape = (84, 84, frames) if last else (frames, 84, 84)
            high, dtype = (1.0, np.float32) if scaled_float else (255, np.uint8)
            self.observation_space = gym.spaces.Box(0, high, shape, dtype)

        def reset(self, **kwargs: Any) -> Any:
            observation, info = self.env.reset(**kwargs)
            self.frames.extend([observation] * frames)
            return self._observation(), info

        def step(self, action: Any) -> Any:
            observation, *rest = self.env.step(action)
            self.frames.append(observation)
            return (self._observation(), *rest)

        def _observation(self) -> Any:
            stacked = np.stack(self.frames, axis=-1 if last else 0)
            return stacked.astype(np.float32) * (1.0 / 255.0) if scaled_float else stacked

    return StackedFrames(env)


def timed_steps(step: Callable[[], int], seconds: float, warmup_s: float = 1.0) -> dict[str, Any]:
    """Call `step` (returns env steps taken) for `warmup_s`, then count steps for `seconds`."""
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        step()
    steps = 0
    start = time.perf_counter()
    while (now := time.perf_counter()) - start < seconds:
        steps += step()
    elapsed = now - start
    return {"env_steps": steps, "measured_s": round(elapsed, 3), "env_steps_per_s": round(steps / elapsed, 1)}


def emit(result: dict[str, Any]) -> None:
    """The result, as the last line of standard output (the parent reads the last JSON line)."""
    print(json.dumps(result), flush=True)
    sys.stdout.flush()
