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


def make_env(name: str, channel_last: bool = False, channel_first: bool = False) -> Any:
    """One gymnasium env for `name`; Pong's frames get a channel axis last or first for CNNs."""
    import gymnasium as gym

    if name == "cartpole":
        return gym.make("CartPole-v1")
    if name != "pong":
        raise SystemExit(f"unknown env {name!r}: cartpole or pong")
    import ale_py

    gym.register_envs(ale_py)
    env = gym.wrappers.AtariPreprocessing(gym.make("ALE/Pong-v5", frameskip=1), **ATARI_PREPROCESSING)
    if channel_last or channel_first:
        return _with_channel_axis(env, last=channel_last)
    return env


def _with_channel_axis(env: Any, last: bool) -> Any:
    """84x84 frames as 84x84x1 or 1x84x84 (gymnasium 0.29, Sample Factory's, has no ReshapeObservation)."""
    import gymnasium as gym
    import numpy as np

    class ChannelAxis(gym.ObservationWrapper):
        def __init__(self, inner: Any) -> None:
            super().__init__(inner)
            shape = (84, 84, 1) if last else (1, 84, 84)
            self.observation_space = gym.spaces.Box(0, 255, shape, np.uint8)

        def observation(self, observation: Any) -> Any:
            return np.expand_dims(observation, -1 if last else 0)

    return ChannelAxis(env)


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
