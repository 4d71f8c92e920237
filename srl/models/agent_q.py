"""Per-agent Q-network for value decomposition (VDN, QMIX: srl.algos.qmix).

Rows come from `srl.envs.central_state.CentralStateEnvironment` ([own obs | agent one-hot |
global state], an `AgentStateBox`). The agents share one network, which reads the agent's own
observation and its one-hot id, never the global state: each agent acts alone on what it sees
(decentralized execution), and only the trainer's mixer reads the state (`global_state`).
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.envs.central_state import AgentStateBox


@register_policy("agent-q")
class AgentQ(Policy):
    kind = "q-network"
    action_spaces = (gym.spaces.Discrete,)

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (64, 64),
    ) -> None:
        super().__init__(observation_space, action_space)
        if not isinstance(observation_space, AgentStateBox):
            raise TypeError(
                "the agent-q policy needs rows with the agent's id and the global state: use env "
                f"'pettingzoo-mappo' (CentralStateEnvironment), not {observation_space}"
            )
        if observation_space.mask_dim:
            raise ValueError("agent-q does not mask actions: value decomposition is for cooperative "
                             "simultaneous-move teams, not turn-based games")
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"agent-q needs a Discrete action space, got {type(action_space).__name__}")
        hidden_sizes = tuple(int(h) for h in hidden_sizes)
        if not hidden_sizes or any(h <= 0 for h in hidden_sizes):
            raise ValueError(f"hidden_sizes must be positive, got {hidden_sizes}")
        self.space = observation_space
        self.action_start = int(action_space.start)
        layers: list[nn.Module] = []
        sizes = (observation_space.own_dim + len(observation_space.agents), *hidden_sizes)
        for in_dim, out_dim in zip(sizes, hidden_sizes):
            layers += [nn.Linear(in_dim, out_dim), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(hidden_sizes[-1], int(action_space.n)))

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}  # the replay targets need nothing from the acting policy

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """obs [B, D] -> Q [B, num_actions], from each row's own observation and id."""
        own, one_hot, _ = self.space.split(obs.reshape(obs.shape[0], -1).float())
        return self.net(torch.cat([own, one_hot], dim=1))

    def global_state(self, obs: torch.Tensor) -> torch.Tensor:
        """A team's rows [B, agents, D] -> the global state [B, state_dim] (every row holds it)."""
        return self.space.split(obs[:, 0].reshape(obs.shape[0], -1).float())[2]

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        action = self.q_values(obs).argmax(dim=-1)
        return {"action": action + self.action_start if self.action_start else action}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        """{"q": Q(obs, action) [B]}, differentiable."""
        index = action.reshape(-1).long() - self.action_start
        return {"q": self.q_values(obs).gather(1, index.unsqueeze(1)).squeeze(1)}

