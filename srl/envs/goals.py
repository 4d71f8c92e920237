"""Goal-conditioned envs as one flat observation, for hindsight relabelling (srl.data.her).

A goal env (gymnasium-robotics' convention) observes a Dict with `observation`, `achieved_goal`
and `desired_goal`, and its unwrapped env has `compute_reward(achieved_goal, desired_goal, info)`
working on batches. `GoalObservation` concatenates the three into one float32 Box,

    [observation | achieved_goal | desired_goal]      (GoalLayout says where each part lies)

so that every policy and algorithm that takes a Box takes it, and the replay memory finds each
step's achieved goal in the stored observation itself (no extra column on the sample stream).
The policy sees the achieved goal too, as SB3's MultiInputPolicy does (its extractor flattens
all three keys); it is a function of the state, so it adds no information the policy could
misuse. `replay.her` puts this wrapper last in `env_wrappers` (srl.config).

`BitFlipping-v0` (Andrychowicz et al., 2017): n bits, the action flips one, reward -1 until the
state equals the goal (then 0 and the episode ends), n steps at most. A random policy almost
never reaches a random goal of 8+ bits, so without relabelling there is nothing to learn from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from srl.config import GOAL_WRAPPER

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")

RewardFn = Callable[[np.ndarray, np.ndarray, Any], np.ndarray]


@dataclass(frozen=True)
class GoalLayout:
    """Where the parts of a `GoalObservation` lie in the flat vector."""

    obs_size: int
    goal_size: int

    @property
    def achieved(self) -> slice:
        return slice(self.obs_size, self.obs_size + self.goal_size)

    @property
    def desired(self) -> slice:
        return slice(self.obs_size + self.goal_size, self.obs_size + 2 * self.goal_size)


def goal_env_problem(env: gym.Env) -> str | None:
    """Why `env` is not a goal env hindsight relabelling can use, or None."""
    space = env.observation_space
    keys = tuple(space.spaces) if isinstance(space, gym.spaces.Dict) else ()
    if not set(GOAL_KEYS) <= set(keys):
        return (f"replay.her (hindsight relabelling) needs an env observing a Dict with keys {', '.join(GOAL_KEYS)}; "
                f"this env observes {space}")
    assert isinstance(space, gym.spaces.Dict)
    parts = [space.spaces[k] for k in GOAL_KEYS]
    if not all(isinstance(p, gym.spaces.Box) for p in parts) or parts[1].shape != parts[2].shape:
        return (f"replay.her needs Box observation, achieved_goal and desired_goal, the two goals of one shape; "
                f"this env has {', '.join(f'{k}={p}' for k, p in zip(GOAL_KEYS, parts))}")
    if not callable(getattr(env.unwrapped, "compute_reward", None)):
        return (f"replay.her needs the env's compute_reward(achieved_goal, desired_goal, info) to recompute rewards "
                f"for relabelled goals; {type(env.unwrapped).__name__} has none")
    return None


class GoalObservation(gym.ObservationWrapper):
    """A goal env's Dict observation as one float32 Box [observation | achieved_goal | desired_goal]."""

    def __init__(self, env: gym.Env) -> None:
        if (problem := goal_env_problem(env)) is not None:
            raise ValueError(problem)
        super().__init__(env)
        spaces = env.observation_space.spaces  # type: ignore[attr-defined]  # a Dict: goal_env_problem
        sizes = [int(np.prod(spaces[k].shape)) for k in GOAL_KEYS]
        self.layout = GoalLayout(sizes[0], sizes[1])
        low = np.concatenate([np.broadcast_to(spaces[k].low, spaces[k].shape).reshape(-1) for k in GOAL_KEYS])
        high = np.concatenate([np.broadcast_to(spaces[k].high, spaces[k].shape).reshape(-1) for k in GOAL_KEYS])
        self.observation_space = gym.spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        self.compute_reward: RewardFn = env.unwrapped.compute_reward  # type: ignore[attr-defined]

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        return np.concatenate([np.asarray(observation[k], np.float32).reshape(-1) for k in GOAL_KEYS])


def find_goal_wrapper(env: gym.Env) -> GoalObservation:
    """The `GoalObservation` in `env`'s wrapper chain; ValueError if there is none."""
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, GoalObservation):
            return layer
        layer = layer.env
    raise ValueError(f"no {GOAL_WRAPPER} among the env's wrappers: replay.her adds it to env_wrappers")


class BitFlippingEnv(gym.Env):
    """n bits; each action flips one; reward 0 when the bits equal the goal (the episode ends), else -1."""

    def __init__(self, n_bits: int = 8, max_steps: int | None = None) -> None:
        self.n_bits = n_bits
        bits = gym.spaces.Box(0.0, 1.0, (n_bits,), np.float32)
        self.observation_space = gym.spaces.Dict({k: bits for k in GOAL_KEYS})
        self.action_space = gym.spaces.Discrete(n_bits)
        self.max_steps = max_steps or n_bits
        self.state = np.zeros(n_bits, np.float32)
        self.goal = np.zeros(n_bits, np.float32)
        self.steps = 0

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        return -np.any(np.asarray(achieved_goal) != np.asarray(desired_goal), axis=-1).astype(np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.state.copy(), "achieved_goal": self.state.copy(), "desired_goal": self.goal.copy()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict]:
        super().reset(seed=seed)
        self.state = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        self.goal = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        while np.array_equal(self.state, self.goal):  # an episode that starts solved teaches nothing
            self.goal = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        self.steps = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        self.state[int(action)] = 1.0 - self.state[int(action)]
        self.steps += 1
        reward = float(self.compute_reward(self.state, self.goal, None))
        success = reward == 0.0
        return self._obs(), reward, success, self.steps >= self.max_steps and not success, {"is_success": success}


gym.register("BitFlipping-v0", entry_point="srl.envs.goals:BitFlippingEnv")
