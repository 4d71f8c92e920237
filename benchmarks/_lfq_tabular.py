"""Tabular Q-learning for benchmarks/lf_qlearning.py: one kernel, and srl's policy and algorithm.

The learner's rule, shared by both sides of the benchmark: each lock-step brings one transition
per worker, applied in worker order,

    Q[s, a] += alpha * (r + gamma * (1 - done) * max_a' Q[s', a'] - Q[s, a])

and every worker acts epsilon-greedily on the table it was sent (ties broken at random, so an
optimistic all-ones table explores systematically). `srl run` imports this file with
`modules=_lfq_tabular` (benchmarks/ on PYTHONPATH): it registers the `q-table` policy, the
`tabular-q` algorithm and the `lf-qlearning` experiment.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from srl.api import Algorithm, AlgorithmConfig, register_algorithm, register_experiment
from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.data import columns as C

ENV_ID = "FrozenLake-v1"
ENV_KWARGS = {"map_name": "8x8", "is_slippery": False}
EPSILON = 0.05  # each worker's exploration rate
ALPHA, GAMMA = 0.5, 0.95
Q_INIT = 1.0  # optimistic: unvisited actions look best, so greedy acting explores
TARGET = 0.7  # mean return (success rate) of the last 100 training episodes, all workers together


def q_update(q: np.ndarray, transitions: list[tuple[int, int, float, int, bool]], alpha: float, gamma: float) -> None:
    """Apply (s, a, r, s', done) transitions to table q [S, A] in place, in the given order."""
    for s, a, r, s2, done in transitions:
        target = r + (0.0 if done else gamma * float(q[s2].max()))
        q[s, a] += alpha * (target - q[s, a])


def epsilon_greedy(q_row: np.ndarray, epsilon: float, rng: np.random.Generator) -> int:
    if rng.random() < epsilon:
        return int(rng.integers(len(q_row)))
    return int(rng.choice(np.flatnonzero(q_row == q_row.max())))


@register_policy("q-table")
class QTable(Policy):
    """A table Q[S, A] as the policy's one parameter (the parameter service serves it)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, epsilon: float = EPSILON,
                 q_init: float = Q_INIT) -> None:
        super().__init__(observation_space, action_space)
        if not (isinstance(observation_space, gym.spaces.Discrete) and isinstance(action_space, gym.spaces.Discrete)):
            raise TypeError("q-table needs Discrete observation and action spaces")
        self.epsilon = float(epsilon)
        self.q = torch.nn.Parameter(
            torch.full((int(observation_space.n), int(action_space.n)), float(q_init), dtype=torch.float64),
            requires_grad=False,
        )

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        q = self.q[obs.reshape(-1).long()]
        # ties at random: argmax over Q plus noise smaller than any real gap between entries
        greedy = (q + 1e-9 * torch.rand(q.shape, dtype=q.dtype)).argmax(dim=-1)
        if deterministic:
            return {"action": greedy}
        explore = torch.rand(len(greedy)) < self.epsilon
        return {"action": torch.where(explore, torch.randint(q.shape[1], greedy.shape), greedy)}

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"q": self.q[obs.reshape(-1).long(), action.reshape(-1).long()]}


class TabularQConfig(AlgorithmConfig):
    alpha: float = ALPHA  # step size of each table update
    gamma: float = GAMMA  # discount


class TabularQ(Algorithm):
    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        T = batch[C.REWARD].shape[0] - 1
        obs, done = batch[C.OBS].numpy(), (batch[C.TERMINATED] | batch[C.TRUNCATED]).numpy()
        # rows flattened time-major: lock-step t's transitions in worker order, then t + 1's
        columns = (obs[:T], batch[C.ACTION].numpy()[:T], batch[C.REWARD].numpy()[:T], obs[1:], done[:T])
        transitions = list(zip(*(column.reshape(-1).tolist() for column in columns)))
        q = self.policy.q.data.numpy()  # a view: the update lands in the parameter
        q_update(q, transitions, self.config.alpha, self.config.gamma)
        return {}


register_algorithm("tabular-q", TabularQ, TabularQConfig)


@register_experiment("lf-qlearning")
def lf_qlearning() -> dict:
    return {
        "env": ENV_ID, "env_kwargs": ENV_KWARGS, "algorithm": "tabular-q", "policy": "q-table",
        "deterministic": True, "inference": "inline", "envs_per_actor": 1, "ring_splits": 1,
        "sample_length": 1, "target_return": TARGET, "total_env_steps": 200_000, "log_interval_s": 0.1,
    }
