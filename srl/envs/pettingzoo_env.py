"""PettingZoo parallel environments as `Environment`s.

`PettingZooEnvironment` adapts a `pettingzoo.ParallelEnv`: its agents are the env's
`possible_agents`, so the row layout never changes while agents come and go. Per step:

* live agents (`env.agents`) get their actions; agents that are not live are not sent one;
* an agent that finished earlier than others keeps its last observation, gets reward 0, and
  keeps being reported with the terminated / truncated flags it finished with;
* an agent that was not live at the start of the episode (or never sent an observation) has an
  all-zero observation until it sends one;
* when `env.agents` becomes empty the episode is over: an agent that has reported neither flag
  is reported truncated, so every agent is done on that step.

pettingzoo is imported lazily (only needed to build envs by module name).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from srl.api.env import Environment, EnvStep

INSTALL_HINT = (
    "PettingZoo environments need the pettingzoo extra (pettingzoo, and mpe2 for the MPE tasks): "
    "pip install 'srl[pettingzoo]'"
)


def require_pettingzoo() -> Any:
    """Import pettingzoo, or raise an ImportError that says how to install it."""
    try:
        return importlib.import_module("pettingzoo")
    except ImportError as e:
        raise ImportError(INSTALL_HINT) from e


class PettingZooEnvironment(Environment):
    """Adapts a PettingZoo `ParallelEnv` (see the module doc for agents that finish early)."""

    def __init__(self, env: Any) -> None:
        require_pettingzoo()
        agents = getattr(env, "possible_agents", None)
        if not agents:
            raise ValueError(
                f"{type(env).__name__} has no possible_agents; PettingZooEnvironment needs the fixed "
                "list of every agent that can appear"
            )
        self.env = env
        self.agents = tuple(agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.agents}
        self.action_spaces = {a: env.action_space(a) for a in self.agents}
        state_space = getattr(env, "state_space", None)  # its global state, if it has one (MPE's does)
        if isinstance(state_space, gym.spaces.Box) and callable(getattr(env, "state", None)):
            self.state_space = state_space
        self._last_obs: dict[str, Any] = {}
        self._done_flags: dict[str, tuple[bool, bool]] = {}  # agent -> (terminated, truncated)

    def _zero_obs(self, agent: str) -> Any:
        space = self.observation_spaces[agent]
        return np.zeros(space.shape, dtype=space.dtype)

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        obs, _ = self.env.reset(seed=seed)
        self._last_obs = {a: obs[a] if a in obs else self._zero_obs(a) for a in self.agents}
        self._done_flags = {}
        return dict(self._last_obs)

    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        live = list(self.env.agents)
        obs, rewards, terms, truncs, infos = self.env.step({a: actions[a] for a in live})
        last_obs, done_flags = self._last_obs, self._done_flags
        reward: dict[str, float] = {}
        terminated: dict[str, bool] = {}
        truncated: dict[str, bool] = {}
        info: dict[str, Any] = {}
        for a in self.agents:
            if a in obs:
                last_obs[a] = obs[a]
            if a in done_flags:  # finished on an earlier step: as it was
                reward[a] = 0.0
                terminated[a], truncated[a] = done_flags[a]
            else:
                reward[a] = float(rewards.get(a, 0.0))
                te, tr = bool(terms.get(a, False)), bool(truncs.get(a, False))
                terminated[a], truncated[a] = te, tr
                if te or tr:
                    done_flags[a] = (te, tr)
            info[a] = infos.get(a, {})
        if not self.env.agents:  # episode over: nobody may be left undone
            for a in self.agents:
                if not (terminated[a] or truncated[a]):
                    truncated[a] = True
                    done_flags[a] = (False, True)
        return EnvStep(dict(last_obs), reward, terminated, truncated, info)

    def state(self) -> np.ndarray:
        """The env's global state (where it has one: see `state_space`)."""
        return np.asarray(self.env.state())

    def close(self) -> None:
        self.env.close()


def import_env_module(module: str) -> Any:
    """Import a PettingZoo env module; a missing package gives an error naming the extra."""
    require_pettingzoo()
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"cannot import {module!r} ({e}). {INSTALL_HINT}") from e


def make_pettingzoo_env(module: str, **kwargs: Any) -> PettingZooEnvironment:
    """`PettingZooEnvironment(importlib.import_module(module).parallel_env(**kwargs))`,
    e.g. module="mpe2.simple_spread_v3"."""
    factory = getattr(import_env_module(module), "parallel_env", None)
    if factory is None:
        raise ValueError(
            f"module {module!r} has no parallel_env(); name a PettingZoo environment module "
            "such as 'pettingzoo.butterfly.pistonball_v6'"
        )
    return PettingZooEnvironment(factory(**kwargs))
