"""MAPPO policy: decentralized actors, a centralized critic, one network pair per policy group.

Rows come from `srl.envs.central_state.CentralStateEnvironment`: [own obs | agent one-hot |
all agents' own obs], described by the `AgentStateBox` observation space. For each policy group:

* the actor sees the agent's own observation, plus its one-hot id when the group has several
  agents (so a shared actor can still tell them apart), and outputs Discrete logits;
* the critic sees the global state (srl.envs.central_state) plus the one-hot id, so each
  agent's value is conditioned on everything (Yu et al., 2022, "agent-specific global state").

`policy_groups` maps agent-name prefixes to group names ({"adversary": "adv", "agent": "good"});
agents of a group share parameters, groups share none. Empty = one group for all agents.

Action masks (turn-based games, srl.envs.pettingzoo_aec): when the space's `mask_dim` > 0 the
last `mask_dim` entries of the own observation mask the logits. A row whose mask is all zero
belongs to an agent that waits: it gets action 0, and `rollout` reports it in the "active"
column (0.0), so PPO trains the critic on it but not the actor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.data import columns as C
from srl.envs.central_state import AgentStateBox
from srl.models.heads import log_prob_entropy, pick, sample
from srl.models.mlp import mlp, orthogonal


def group_of_agents(agents: Sequence[str], policy_groups: Mapping[str, str]) -> list[int]:
    """Group index of each agent: the group of its longest matching prefix (groups numbered in
    the order they first appear in `policy_groups`); raises ValueError for an unmatched agent."""
    if not policy_groups:
        return [0] * len(agents)
    names = list(dict.fromkeys(policy_groups.values()))
    out = []
    for agent in agents:
        matches = [p for p in policy_groups if agent.startswith(p)]
        if not matches:
            raise ValueError(
                f"policy_groups: agent {agent!r} matches none of the prefixes {sorted(policy_groups)}; "
                f"the agents are {list(agents)}"
            )
        out.append(names.index(policy_groups[max(matches, key=len)]))
    return out


def _mlp(in_dim: int, hidden: Sequence[int], out_dim: int, out_gain: float) -> nn.Sequential:
    net = mlp(in_dim, hidden, out_dim, nn.Tanh)
    linears = [m for m in net if isinstance(m, nn.Linear)]
    for layer in linears[:-1]:
        orthogonal(layer)
    orthogonal(linears[-1], out_gain)
    return net


class MAPPOPolicy(Policy):
    """Actor-critic per policy group over `AgentStateBox` rows; see the module doc."""

    kind = "actor-critic"
    action_spaces = (gym.spaces.Discrete,)
    agent_group: torch.Tensor  # a buffer (register_buffer): each agent's policy group

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: Sequence[int] = (64, 64),
        policy_groups: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(observation_space, action_space)
        if not isinstance(observation_space, AgentStateBox):
            raise TypeError(
                "the mappo policy needs rows with the global state: use env 'pettingzoo-mappo' or "
                f"'pettingzoo-aec' (CentralStateEnvironment), not {observation_space}"
            )
        if not isinstance(action_space, gym.spaces.Discrete):
            raise TypeError(f"the mappo policy needs a Discrete action space, got {action_space}")
        space = observation_space
        self.space = space
        self.num_agents, self.own_dim, self.mask_dim = len(space.agents), space.own_dim, space.mask_dim
        self.num_actions = int(action_space.n)
        self.action_start = int(action_space.start)
        if self.mask_dim and self.mask_dim != self.num_actions:
            raise ValueError(f"action mask of {self.mask_dim} entries for {self.num_actions} actions")
        groups = group_of_agents(space.agents, dict(policy_groups or {}))
        self.register_buffer("agent_group", torch.tensor(groups, dtype=torch.long), persistent=False)
        self.num_groups = max(groups) + 1
        self.one_hot_actor = [groups.count(g) > 1 for g in range(self.num_groups)]
        n, own = self.num_agents, self.own_dim
        self.actors = nn.ModuleList(
            _mlp(own + (n if self.one_hot_actor[g] else 0), hidden_sizes, self.num_actions, 0.01)
            for g in range(self.num_groups)
        )
        self.critics = nn.ModuleList(_mlp(n + space.state_dim, hidden_sizes, 1, 1.0) for _ in range(self.num_groups))

    def rollout_fields(self) -> dict[str, FieldSpec]:
        fields = {C.LOG_PROB: FieldSpec((), np.float32), C.VALUE: FieldSpec((), np.float32)}
        if self.mask_dim:
            fields[C.ACTIVE] = FieldSpec((), np.float32)
        return fields

    def _forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """obs [B, D] -> (masked log-probabilities [B, actions], value [B])."""
        x = obs.reshape(obs.shape[0], -1).float()
        own, one_hot, state = self.space.split(x)
        critic_in = torch.cat([one_hot, state], dim=1)
        if self.num_groups == 1:
            logits = self.actors[0](torch.cat([own, one_hot], 1) if self.one_hot_actor[0] else own)
            value = self.critics[0](critic_in).squeeze(-1)
        else:
            group = self.agent_group[one_hot.argmax(dim=1)]
            logits = x.new_zeros(x.shape[0], self.num_actions)
            value = x.new_zeros(x.shape[0])
            for g in range(self.num_groups):
                rows = (group == g).nonzero().squeeze(-1)
                actor_in = torch.cat([own, one_hot], 1) if self.one_hot_actor[g] else own
                logits = logits.index_copy(0, rows, self.actors[g](actor_in[rows]))
                value = value.index_copy(0, rows, self.critics[g](critic_in[rows]).squeeze(-1))
        if self.mask_dim:
            allowed = self.space.action_mask(x) > 0.5
            waiting = ~allowed.any(dim=1, keepdim=True)
            logits = logits.masked_fill(~(allowed | waiting), -1e9)  # a waiting row keeps its logits
        return torch.log_softmax(logits, dim=-1), value

    def _active(self, obs: torch.Tensor) -> torch.Tensor:
        mask = self.space.action_mask(obs.reshape(obs.shape[0], -1))
        return (mask > 0.5).any(dim=1).float()

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        log_probs, value = self._forward(obs)
        index = sample(log_probs, deterministic)
        out = {C.LOG_PROB: pick(log_probs, index), C.VALUE: value}
        if self.mask_dim:
            active = self._active(obs)
            index = index * active.long()  # a waiting agent's action is ignored by the env: 0
            out[C.ACTIVE] = active
        out["action"] = index + self.action_start
        return out

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        log_probs, value = self._forward(obs)
        log_prob, entropy = log_prob_entropy(log_probs, action.reshape(-1).long() - self.action_start)
        return {C.LOG_PROB: log_prob, "entropy": entropy, C.VALUE: value}

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self._forward(obs)[1]


register_policy("mappo")(MAPPOPolicy)
