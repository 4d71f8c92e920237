"""A scripted turn-based PettingZoo AEC env whose numbers make bookkeeping errors arithmetic.

Three agents move in turn (move m by agent m % 3) for MOVES moves. Each agent observes
[episode number, move index]; on move m only action (m + k) % 3 is legal for agent k (its mask).
Rewards on move m: the mover gets m + 1, the previous mover gets 100 * (m + 1), and on the last
move every agent j also gets 10_000 * (j + 1). So the reward credited to agent k's move m (all
it receives until its next move) is known in closed form: `credited_reward`.
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np
from pettingzoo import AECEnv

from srl.api import registry
from srl.envs import CentralStateEnvironment
from srl.envs.pettingzoo_aec import AECEnvironment

AGENTS = ("p0", "p1", "p2")
MOVES = 8


def legal_action(agent_index: int, move: int) -> int:
    return (move + agent_index) % 3


def credited_reward(agent_index: int, move: int) -> float:
    out = move + 1.0
    if move + 1 < MOVES:
        out += 100.0 * (move + 2)
    if move + 3 >= MOVES:
        out += 10_000.0 * (agent_index + 1)
    return out


class ScriptedTurns(AECEnv):
    metadata: ClassVar[dict] = {"name": "scripted_turns_v0"}

    def __init__(self, dict_obs: bool = True) -> None:
        super().__init__()
        self.dict_obs = dict_obs  # False: a plain Box observation with no action mask
        self.possible_agents = list(AGENTS)
        self.episode = -1
        self.illegal_actions = 0

    def observation_space(self, agent):
        if not self.dict_obs:
            return gym.spaces.Box(0, np.inf, (2,), np.float32)
        return gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(0, np.inf, (2,), np.float32),
                "action_mask": gym.spaces.Box(0, 1, (3,), np.int8),
            }
        )

    def action_space(self, agent):
        return gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.episode += 1
        self.move = 0
        self.agents = list(AGENTS)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = AGENTS[0]

    def observe(self, agent):
        k = AGENTS.index(agent)
        mask = np.zeros(3, np.int8)
        mask[legal_action(k, self.move)] = 1
        if not self.dict_obs:
            return np.array([self.episode, self.move], np.float32)
        return {"observation": np.array([self.episode, self.move], np.float32), "action_mask": mask}

    def step(self, action):
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        k, m = AGENTS.index(agent), self.move
        if action != legal_action(k, m):
            self.illegal_actions += 1
        self._clear_rewards()
        self.rewards[agent] += m + 1.0
        if m > 0:
            self.rewards[AGENTS[(m - 1) % 3]] += 100.0 * (m + 1)
        if m == MOVES - 1:
            for j, a in enumerate(AGENTS):
                self.rewards[a] += 10_000.0 * (j + 1)
                self.terminations[a] = True
        self.move += 1
        self.agent_selection = AGENTS[self.move % 3]
        self._accumulate_rewards()


@registry.register_env("scripted-turns")
def scripted_turns() -> CentralStateEnvironment:
    return CentralStateEnvironment(AECEnvironment(ScriptedTurns()))
