"""DQN (Mnih et al., 2015) with the Ape-X refinements: double-DQN targets (van Hasselt et al.,
2016), n-step returns and prioritized replay (computed by the buffer worker), Huber loss.

One `step` on a replay batch (srl.data.replay.batch_fields, rows of n-step transitions):

    a*     = argmax_a Q_online(next_obs, a)                   (double DQN: online picks)
    target = reward + discount * Q_target(next_obs, a*)       (discount = gamma^n, 0 if terminal)
    loss   = mean(weight * huber(target - Q_online(obs, action)))

then |target - Q| goes into batch["priority"], which the buffer reads back when the trainer
releases the batch. The target network follows the online one every target_update_interval
updates (or softly, by tau, every update).
"""

from __future__ import annotations

import torch
from pydantic import Field

from srl.algos.exploration import EpsilonGreedyConfig
from srl.algos.q_learning import QLearning
from srl.api.policy import Policy
from srl.api.registry import register_algorithm
from srl.data import columns as C
from srl.spaces import map_obs_pair, num_rows, obs_of


class DQNConfig(EpsilonGreedyConfig):
    """DQN hyperparameters (gamma and n-step live in `replay`, where the returns are computed)."""

    lr: float = Field(5e-4, gt=0, description="Adam learning rate.")
    adam_eps: float = Field(1e-5, gt=0, description="Adam epsilon.")
    double_dqn: bool = Field(True, description="The online network picks the next action, the target rates it.")
    target_update_interval: int = Field(
        500, ge=1, description="Updates between copies of the online network into the target (tau = 1)."
    )
    tau: float = Field(1.0, gt=0, le=1, description="Target update: target += tau * (online - target) at each "
                       "interval; 1 = hard copy. With tau < 1 set target_update_interval small (e.g. 1).")
    huber_delta: float = Field(1.0, gt=0, description="TD errors beyond this are penalised linearly.")
    max_grad_norm: float | None = Field(10.0, gt=0, description="Clip the global gradient norm; None = off.")


class DQN(QLearning):
    config: DQNConfig

    def __init__(self, policy: Policy, config: DQNConfig, total_env_steps: int) -> None:
        if not isinstance(config, DQNConfig):
            raise TypeError(f"DQN needs a DQNConfig, got {type(config).__name__}")
        super().__init__(policy, config, total_env_steps)

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        cfg = self.config
        obs, next_obs = obs_of(batch), obs_of(batch, C.NEXT_OBS)  # tensors, or leaf path -> tensor (srl.spaces)
        n = num_rows(obs)
        # one online pass over obs and next_obs (on small batches the cost is per call, not per row)
        both = map_obs_pair(torch.cat, obs, next_obs)
        q_all = self.policy.q_values(both)
        index = batch[C.ACTION].reshape(-1).long() - self.action_start
        q = q_all[:n].gather(1, index.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            next_q = self.target.q_values(next_obs)
            picker = q_all[n:].detach() if cfg.double_dqn else next_q
            best = next_q.gather(1, picker.argmax(dim=1, keepdim=True)).squeeze(1)
            target = batch[C.REWARD] + batch[C.DISCOUNT] * best
        td_abs = (target - q).detach().abs()
        loss = (batch[C.WEIGHT] * torch.nn.functional.huber_loss(q, target, reduction="none",
                                                                  delta=cfg.huber_delta)).mean()
        stats = self._td_step(loss, q, td_abs)
        batch[C.PRIORITY].copy_(td_abs)
        return stats

    @torch.no_grad()
    def _update_target(self) -> None:
        if self.config.tau == 1.0:
            self.target.load_state_dict(self.policy.state_dict())
            return
        for t, p in zip(self.target.parameters(), self.policy.parameters()):
            t.lerp_(p, self.config.tau)


register_algorithm("dqn", DQN, DQNConfig)
