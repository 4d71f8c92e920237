"""Turn-based PettingZoo AEC games (tictactoe, connect four, ...) as parallel `Environment`s.

srl steps every agent's row on every step, but in an AEC game one agent acts at a time. The
adapter turns each AEC step into one srl step:

* every row gets an observation; its last `action_mask_dim` entries are the action mask of
  the agent that acts now (the env's own "action_mask" where it gives one, else all ones) and
  all zeros for every waiting agent. A row with a zero mask did not act: its action is ignored,
  and the policy marks the row inactive (srl.models.mappo), so PPO leaves it out of the policy
  loss and folds the rewards it receives into the agent's last action (srl.algos.gae);
* rewards are the env's per-step `rewards` for every agent, acting or not (a loss reaches
  the waiting player on the winner's move);
* when an agent finishes, the adapter steps it out with `None` as the AEC API requires; the
  episode is over when no agent is left, and every agent not yet done is reported truncated.

Dict observations {"observation", "action_mask"} are flattened; Box observations are used
as they are. Actions must be Discrete (masks are per discrete action).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from srl.api.env import Environment, EnvStep
from srl.envs.pettingzoo_env import require_pettingzoo


def _observation_size(space: gym.Space) -> int:
    """Values in an observation (its "observation" entry, for a Dict space with an action mask)."""
    part = space["observation"] if isinstance(space, gym.spaces.Dict) else space
    return int(np.prod(part.shape or ()))


class AECEnvironment(Environment):
    """Adapts a PettingZoo `AECEnv` with Discrete actions; see the module doc."""

    def __init__(self, env: Any) -> None:
        require_pettingzoo()
        self.env = env
        self.agents = tuple(env.possible_agents)
        first = env.action_space(self.agents[0])
        if not all(isinstance(env.action_space(a), gym.spaces.Discrete) for a in self.agents):
            raise ValueError(f"AECEnvironment needs Discrete actions for every agent, got {first}")
        self.action_mask_dim = max(int(env.action_space(a).n) for a in self.agents)
        self._obs_dims = {a: _observation_size(env.observation_space(a)) for a in self.agents}
        self.observation_spaces = {
            a: gym.spaces.Box(-np.inf, np.inf, (self._obs_dims[a] + self.action_mask_dim,), np.float32)
            for a in self.agents
        }
        self.action_spaces = {a: env.action_space(a) for a in self.agents}
        self._last: dict[str, np.ndarray] = {}  # each agent's latest observation

    def _observe(self, agent: str, acting: bool) -> np.ndarray:
        raw = self.env.observe(agent)
        mask = np.zeros(self.action_mask_dim, np.float32)
        if isinstance(raw, Mapping):
            obs = np.asarray(raw["observation"], np.float32).reshape(-1)
            given = raw.get("action_mask")
        else:
            obs, given = np.asarray(raw, np.float32).reshape(-1), None
        if acting:
            n = int(self.env.action_space(agent).n)
            mask[:n] = 1.0 if given is None else np.asarray(given, np.float32)[:n]
        return np.concatenate([obs, mask])

    def _all_obs(self) -> dict[str, np.ndarray]:
        live = set(self.env.agents)
        acting = self.env.agent_selection if live else None
        # an agent that is gone gets no mask, an all-zero row
        out = {a: self._observe(a, a == acting) if a in live else self._last[a] * 0.0 for a in self.agents}
        self._last = out
        return out

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        self.env.reset(seed=seed)
        self._last = {a: np.zeros(self._obs_dims[a] + self.action_mask_dim, np.float32) for a in self.agents}
        self._done: dict[str, tuple[bool, bool]] = {}
        return self._all_obs()

    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        env = self.env
        reward = dict.fromkeys(self.agents, 0.0)
        agent = env.agent_selection
        env.step(int(actions[agent]))
        self._collect(reward)
        while env.agents and self._is_done(env.agent_selection):  # finished agents leave with None
            env.step(None)
            self._collect(reward)
        over = not env.agents
        terminated = {a: self._done.get(a, (False, False))[0] for a in self.agents}
        truncated = {a: self._done.get(a, (False, over))[1] for a in self.agents}
        obs = self._all_obs() if not over else {a: self._last[a] for a in self.agents}
        return EnvStep(obs, reward, terminated, truncated, {a: {} for a in self.agents})

    def _is_done(self, agent: str) -> bool:
        return bool(self.env.terminations.get(agent) or self.env.truncations.get(agent))

    def _collect(self, reward: dict[str, float]) -> None:
        """Add this AEC step's rewards; remember who finished (terminated wins over truncated)."""
        env = self.env
        for a in self.agents:
            reward[a] += float(env.rewards.get(a, 0.0))
            if a not in self._done and a in env.terminations:
                te, tr = bool(env.terminations[a]), bool(env.truncations[a])
                if te or tr:
                    self._done[a] = (te, tr and not te)

    def close(self) -> None:
        self.env.close()
