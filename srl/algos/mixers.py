"""Value decomposition for cooperative teams: a team's Q as a function of its agents' Qs.

    VDN  (Sunehag et al., 2018):  Q_tot(s, a) = sum_i Q_i(o_i, a_i)
    QMIX (Rashid et al., 2018):   Q_tot(s, a) = f_s(Q_1, ..., Q_n), monotonic in every Q_i

QMIX's mixer is a two-layer network whose weights come from hypernetworks of the global state s
and pass through abs(), so dQ_tot / dQ_i >= 0: the joint greedy action is every agent's own
greedy action, and agents act alone at execution. The biases are free (a state value V(s) for
the last one). `td_loss` is the team's TD loss that both train with: one reward per team and
step, the target mixer rating the target agents' greedy next actions (picked by the online
agents, as double DQN does).
"""

from __future__ import annotations

import torch
from torch import nn


class VDNMixer(nn.Module):
    """Q_tot = the sum of the agents' Qs (no parameters, no state)."""

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """agent_qs [B, agents] -> [B]."""
        return agent_qs.sum(dim=1)


class QMixer(nn.Module):
    """A monotonic mixing network conditioned on the global state; see the module doc."""

    def __init__(self, num_agents: int, state_dim: int, embed_dim: int = 32, hypernet_hidden: int = 64) -> None:
        super().__init__()
        if num_agents < 1 or state_dim < 1:
            raise ValueError(f"QMixer needs agents and a state, got {num_agents} agents, state_dim {state_dim}")
        self.num_agents, self.embed_dim = num_agents, embed_dim
        self.hyper_w1 = nn.Sequential(
            nn.Linear(state_dim, hypernet_hidden), nn.ReLU(), nn.Linear(hypernet_hidden, num_agents * embed_dim)
        )
        self.hyper_b1 = nn.Linear(state_dim, embed_dim)
        self.hyper_w2 = nn.Sequential(nn.Linear(state_dim, hypernet_hidden), nn.ReLU(), nn.Linear(hypernet_hidden, embed_dim))
        self.state_value = nn.Sequential(nn.Linear(state_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, 1))

    def forward(self, agent_qs: torch.Tensor, state: torch.Tensor | None = None) -> torch.Tensor:
        """agent_qs [B, agents], state [B, state_dim] -> Q_tot [B]."""
        if state is None:
            raise ValueError("QMixer needs the global state")
        batch = agent_qs.shape[0]
        state = state.reshape(batch, -1).float()
        w1 = self.hyper_w1(state).abs().view(batch, self.num_agents, self.embed_dim)  # abs: monotonic
        hidden = nn.functional.elu(torch.bmm(agent_qs.unsqueeze(1), w1).squeeze(1) + self.hyper_b1(state))
        w2 = self.hyper_w2(state).abs()
        return (hidden * w2).sum(dim=1) + self.state_value(state).squeeze(1)


def td_loss(
    mixer: nn.Module,
    target_mixer: nn.Module,
    taken_qs: torch.Tensor,
    next_online_qs: torch.Tensor,
    next_target_qs: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    state: torch.Tensor | None = None,
    next_state: torch.Tensor | None = None,
    next_mask: torch.Tensor | None = None,
    weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The team's mean squared TD error and its |TD| per transition.

    taken_qs [B, agents]: each agent's Q of the action it took; next_online_qs, next_target_qs
    [B, agents, actions]: every action's Q at the next step; reward, discount [B] (discount = 0
    where the episode ended); next_mask [B, agents, actions]: the legal next actions (None: all);
    weight [B]: prioritized replay's importance weights (None: all 1).
    """
    with torch.no_grad():
        picking = next_online_qs if next_mask is None else next_online_qs.masked_fill(next_mask < 0.5, float("-inf"))
        best = picking.argmax(dim=2, keepdim=True)  # each agent's own greedy action: QMIX's joint greedy one
        next_tot = target_mixer(next_target_qs.gather(2, best).squeeze(2), next_state)
        target = reward + discount * next_tot
    td = mixer(taken_qs, state) - target
    squared = td.square() if weight is None else weight * td.square()
    return squared.mean(), td.detach().abs()
