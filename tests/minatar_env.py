"""MinAtar's Gymnasium ids, registered on import (env="minatar_env:MinAtar/Breakout-v1").

MinAtar registers its ids only when `minatar.gym.register_envs()` is called, so the `module:EnvId`
form needs a module that calls it: this one (the recipe for any package that registers on a call).
"""

from __future__ import annotations

import gymnasium as gym
from minatar.gym import register_envs

if "MinAtar/Breakout-v1" not in gym.envs.registry:
    register_envs()
