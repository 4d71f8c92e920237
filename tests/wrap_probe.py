"""Gymnasium wrappers for tests/test_env_wrappers.py, named in `env_wrappers` as wrap_probe.NAME."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import setproctitle


class LogWraps(gym.Wrapper):
    """Appends the title of the process that wrapped an env (srl:EXPERIMENT:ROLE:INDEX in a worker)
    to the file `log`, one line per env: who built how many envs, across processes."""

    def __init__(self, env: gym.Env, log: str) -> None:
        super().__init__(env)
        with open(log, "a") as f:
            f.write(setproctitle.getproctitle().split()[0] + "\n")


class AppendConstant(gym.ObservationWrapper):
    """One more observation feature, always `value`: a wrapped env's space is not the env's own."""

    def __init__(self, env: gym.Env, value: float = 1.0) -> None:
        super().__init__(env)
        space = env.observation_space
        self.value = np.float32(value)
        self.observation_space = gym.spaces.Box(
            np.append(space.low, self.value), np.append(space.high, self.value), dtype=np.float32
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.append(observation, self.value).astype(np.float32)


def not_an_env(env: gym.Env) -> str:
    """Callable as a wrapper, but what it returns is no env."""
    return "not an env"
