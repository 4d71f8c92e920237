"""A goal-conditioned env for tests (importable: modules=goal_env), shaped like gymnasium-robotics'
goal envs: a Dict observation {"observation", "achieved_goal", "desired_goal"}, `compute_reward`,
and `info["is_success"]` at every step.

A point in the plane, started at the origin, moves by `SPEED * action` (a Box(-1, 1, (2,))) each
step towards a goal drawn in [-1, 1]^2. Reward: minus the distance to the goal (dense, so that a
small budget shows learning); success: within `SUCCESS_DISTANCE`. Episodes last `episode_steps`
steps (a time limit). Random play scores about -12 per episode of 20 steps; heading straight for
the goal about -4, and it succeeds most of the time.

`Slow` (id srl-tests/SlowGoal-v0) sleeps `step_s` per step: a slow env, against which the replay
trainer's updates per env step are counted.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np

SPEED, SUCCESS_DISTANCE = 0.15, 0.1


class PointGoal(gym.Env):
    observation_space = gym.spaces.Dict({
        "observation": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
        "achieved_goal": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
        "desired_goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    })
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def __init__(self, episode_steps: int = 20) -> None:
        self.episode_steps = episode_steps

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.position.copy(), "achieved_goal": self.position.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.position = np.zeros(2, np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), {"is_success": 0.0}

    def step(self, action):
        move = SPEED * np.clip(np.asarray(action, np.float32), -1, 1)
        self.position = np.clip(self.position + move, -2, 2).astype(np.float32)
        self.t += 1
        reward = float(self.compute_reward(self.position, self.goal, {}))
        success = float(-reward < SUCCESS_DISTANCE)
        return self._obs(), reward, False, self.t >= self.episode_steps, {"is_success": success}


class Slow(PointGoal):
    def __init__(self, episode_steps: int = 20, step_s: float = 0.002) -> None:
        super().__init__(episode_steps)
        self.step_s = step_s

    def step(self, action):
        time.sleep(self.step_s)
        return super().step(action)


gym.register("srl-tests/PointGoal-v0", entry_point=PointGoal)
gym.register("srl-tests/SlowGoal-v0", entry_point=Slow)
