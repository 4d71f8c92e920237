"""Value decomposition for cooperative teams on the replay dataflow: VDN (Sunehag et al., 2018)
and QMIX (Rashid et al., 2018), with the mixers of srl.algos.mixers.

The buffer worker stores team transitions (srl.data.team): every agent of one env at one step,
with the team's n-step return of its summed rewards. One `step` on a batch of them
(obs [B, agents, D], action [B, agents]):

    Q_i    = Q_online(o_i, a_i)                     one network shared by the agents (its rows tell
                                                    them apart: srl.models.agent_q)
    a_i*   = argmax_a Q_online(o'_i, a)             each agent's own greedy action, which the
                                                    monotonic mixer makes the team's greedy one
    target = reward + discount * mixer_target(Q_target(o'_i, a_i*), s')
    loss   = mean(weight * (mixer(Q_1 .. Q_n, s) - target)^2)

s is the global state the agents' rows carry (the env's own where it offers one,
srl.envs.central_state); VDN's mixer is a sum and reads none. The mixer trains with the agents'
network but stays with the trainer: actors receive the agents' network only, and act alone.
|TD| goes back to the buffer as the team transition's priority.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

import torch
from pydantic import Field

from srl.algos.adam import Adam
from srl.algos.exploration import EpsilonGreedyConfig
from srl.algos.mixers import QMixer, VDNMixer, td_loss
from srl.algos.q_learning import QLearning
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data import columns as C
from srl.envs.central_state import AgentStateBox


class QMIXConfig(EpsilonGreedyConfig):
    """QMIX / VDN hyperparameters (gamma and n-step live in `replay`, where the returns are computed)."""

    mixer: Literal["qmix", "vdn"] = Field("qmix", description="qmix: a monotonic network of the global state; "
                                          "vdn: the sum of the agents' Qs.")
    lr: float = Field(5e-4, gt=0, description="Adam learning rate (agents' network and mixer).")
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")
    target_update_interval: int = Field(200, ge=1, description="Updates between copies of the online "
                                        "network and mixer into the targets.")
    mixer_embed_dim: int = Field(32, ge=1, description="QMIX: width of the mixing layer.")
    hypernet_hidden: int = Field(64, ge=1, description="QMIX: hidden width of the hypernetworks.")
    max_grad_norm: float | None = Field(10.0, gt=0, description="Clip the global gradient norm; None = off.")


class VDNConfig(QMIXConfig):
    """algorithm=vdn: QMIX's settings with the sum for a mixer."""

    mixer: Literal["vdn"] = Field("vdn", description="The sum of the agents' Qs (algorithm=qmix takes either).")


class QMIX(QLearning):
    team_transitions = True  # items hold every agent of an env (srl.data.team)
    default_policy = "agent-q"
    # the multiagent experiment's (srl.experiments.multiagent): uniform, one update per 8 team transitions
    default_replay: ClassVar[dict[str, Any]] = {"batch_size": 128, "prioritized": False, "replay_ratio": 16.0}
    config: QMIXConfig

    def __init__(self, policy: Policy, config: QMIXConfig, total_env_steps: int) -> None:
        if not isinstance(config, QMIXConfig):
            raise TypeError(f"QMIX needs a QMIXConfig, got {type(config).__name__}")
        super().__init__(policy, config, total_env_steps)
        device = next(policy.parameters()).device
        self.mixer = self._mixer(policy, config).to(device)  # trained beside the policy, on its device
        # a team's rows [B, agents, D] -> the global state [B, S], for QMIX's mixer (checked in _mixer)
        self.state_of = getattr(policy, "global_state", None) if isinstance(self.mixer, QMixer) else None
        self.target_mixer = copy.deepcopy(self.mixer).requires_grad_(False)
        self.params += list(self.mixer.parameters())
        self.optimizer = Adam(self.params, lr=config.lr, eps=config.adam_eps)

    @staticmethod
    def _mixer(policy: Policy, config: QMIXConfig) -> torch.nn.Module:
        if config.mixer == "vdn":
            return VDNMixer()
        space = policy.observation_space
        if not callable(getattr(policy, "global_state", None)) or not isinstance(space, AgentStateBox):
            raise TypeError(f"the qmix mixer reads the global state from the agents' rows: use policy 'agent-q' "
                            f"on env 'pettingzoo-mappo', or algo.mixer 'vdn' (policy {type(policy).__name__}, "
                            f"observation {space})")
        return QMixer(space.team, space.state_dim, config.mixer_embed_dim, config.hypernet_hidden)

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        obs, next_obs, action = batch[C.OBS], batch[C.NEXT_OBS], batch[C.ACTION]
        B, agents = action.shape[:2]
        q_all = self.policy.q_values(torch.cat([obs, next_obs]).flatten(0, 1)).view(2, B, agents, -1)
        taken = q_all[0].gather(2, (action.long() - self.action_start).view(B, agents, 1)).squeeze(2)
        with torch.no_grad():
            next_target = self.target.q_values(next_obs.flatten(0, 1)).view(B, agents, -1)
        state = next_state = None
        if self.state_of is not None:
            state, next_state = self.state_of(obs), self.state_of(next_obs)
        loss, td_abs = td_loss(self.mixer, self.target_mixer, taken, q_all[1].detach(), next_target,
                               batch[C.REWARD], batch[C.DISCOUNT], state, next_state, weight=batch[C.WEIGHT])
        stats = self._td_step(loss, taken, td_abs)
        batch[C.PRIORITY].copy_(td_abs)
        return stats

    @torch.no_grad()
    def _update_target(self) -> None:
        super()._update_target()
        self.target_mixer.load_state_dict(self.mixer.state_dict())

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "mixer": self.mixer.state_dict(), "target_mixer": self.target_mixer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.mixer.load_state_dict(state["mixer"])
        self.target_mixer.load_state_dict(state["target_mixer"])


register_algorithm("qmix", QMIX, QMIXConfig)
register_algorithm("vdn", QMIX, VDNConfig)
