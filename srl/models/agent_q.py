"""Per-agent Q-network for value decomposition (VDN, QMIX: srl.algos.qmix).

Rows come from `srl.envs.central_state.CentralStateEnvironment` ([own obs | agent one-hot |
global state], an `AgentStateBox`). The agents share one network, which reads the agent's own
observation and its one-hot id, never the global state: each agent acts alone on what it sees
(decentralized execution), and only the trainer's mixer reads the state (`global_state`).
Acting, `q_values` and `analyze` are q-mlp's.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import torch

from srl.api.registry import register_policy
from srl.envs.central_state import AgentStateBox
from srl.models.qmlp import QMLP


@register_policy("agent-q")
class AgentQ(QMLP):
    composite_observations = False  # rows of an AgentStateBox only
    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (64, 64),
    ) -> None:
        if not isinstance(observation_space, AgentStateBox):
            raise TypeError(
                "the agent-q policy needs rows with the agent's id and the global state: use env "
                f"'pettingzoo-mappo' (CentralStateEnvironment), not {observation_space}"
            )
        if observation_space.mask_dim:
            raise ValueError("agent-q does not mask actions: value decomposition is for cooperative "
                             "simultaneous-move teams, not turn-based games")
        self.space = observation_space
        super().__init__(observation_space, action_space, hidden_sizes)

    def input_dim(self) -> int:
        return self.space.own_dim + len(self.space.agents)

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """Each row's own observation and id."""
        own, one_hot, _ = self.space.split(obs.reshape(obs.shape[0], -1).float())
        return torch.cat([own, one_hot], dim=1)

    def global_state(self, obs: torch.Tensor) -> torch.Tensor:
        """A team's rows [B, agents, D] -> the global state [B, state_dim] (every row holds it)."""
        return self.space.split(obs[:, 0].reshape(obs.shape[0], -1).float())[2]
