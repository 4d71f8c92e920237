"""Epsilon-greedy exploration with a fixed epsilon per environment (Ape-X, Horgan et al., 2018).

Of N environments across all actors, environment i acts at random with probability

    eps_i = epsilon ** (1 + alpha * i / (N - 1))

so a few explore widely (eps_0 = epsilon) and most act almost greedily, with no schedule to
tune: the spread of behaviour comes from the population, not from time. Applied where actions
are chosen (srl.workers.policy.Acting), after the policy's greedy action.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from srl.api.algorithm import AlgorithmConfig
from srl.streams.inference import Slot


class EpsilonGreedyConfig(AlgorithmConfig):
    """The exploration of a Q-learning algorithm's actors (DQN, R2D2): its own settings."""

    epsilon: float | None = Field(
        0.2, gt=0, le=1, description="Per-env epsilon-greedy exploration (Ape-X): env i of N acts at random "
        "with probability epsilon^(1 + epsilon_alpha * i / (N - 1)). Discrete actions; None = off."
    )
    epsilon_alpha: float = Field(7.0, ge=0, description="Spread of the per-env epsilons (0 = all equal).")
    epsilon_anneal_env_steps: int = Field(
        0, ge=0, description="Over the run's first this many env steps each env's epsilon falls linearly from "
        "epsilon_start to its own (the schedule of QMIX and DQN papers, under the Ape-X spread); 0 = off."
    )
    epsilon_start: float = Field(1.0, gt=0, le=1, description="Every env's epsilon at the first step, with "
                                 "epsilon_anneal_env_steps.")


def apex_epsilons(num_envs: int, epsilon: float, alpha: float) -> np.ndarray:
    """eps_i of environments 0 .. num_envs - 1."""
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if num_envs == 1:
        return np.array([epsilon], np.float64)
    return epsilon ** (1.0 + alpha * np.arange(num_envs) / (num_envs - 1))


class EpsilonGreedy:
    """Replaces a slot's actions, row by row, by uniform random ones with the row's epsilon.

    With `anneal_env_steps`, a row's epsilon starts at `epsilon_start` and falls linearly to its
    own over that many env steps of the run. The run's env steps are counted where actions are
    chosen: the slots served to one (actor, split) times the run's envs, since every env group
    steps at the same pace. A restarted policy worker counts from 0 again (a short burst of
    exploration), and so does a resumed run.
    """

    def __init__(self, epsilons: dict[tuple[int, int], np.ndarray], num_actions: int, start: int, seed: int,
                 anneal_env_steps: int = 0, epsilon_start: float = 1.0, run_envs: int = 1) -> None:
        self.epsilons = epsilons  # (actor, split) -> epsilon of each row of its inference slot
        self.num_actions, self.start = num_actions, start
        self.rng = np.random.default_rng(seed)
        self.random_actions = 0  # since the last report
        self.anneal_env_steps, self.epsilon_start, self.run_envs = anneal_env_steps, epsilon_start, run_envs
        self.slots_served: dict[tuple[int, int], int] = dict.fromkeys(epsilons, 0)

    def _annealed(self, eps: np.ndarray, group: tuple[int, int]) -> np.ndarray:
        served = self.slots_served[group]
        self.slots_served[group] = served + 1
        if not self.anneal_env_steps:
            return eps
        left = max(0.0, 1.0 - served * self.run_envs / self.anneal_env_steps)  # of the schedule
        return eps + left * np.maximum(0.0, self.epsilon_start - eps)

    def __call__(self, slot: Slot, actor: int, split: int) -> None:
        eps = self._annealed(self.epsilons[(actor, split)], (actor, split))
        explore = self.rng.random(len(eps)) < eps
        count = int(explore.sum())
        if count:
            slot["action"][explore] = self.start + self.rng.integers(0, self.num_actions, count)
            self.random_actions += count


def slot_epsilons(
    epsilon: float, alpha: float, num_actors: int, splits: int, envs_per_split: int, agents: int
) -> dict[tuple[int, int], np.ndarray]:
    """Per-row epsilons of every (actor, split) slot; all agents of one env share its epsilon."""
    # env i of the run belongs to ring group i // envs_per_split = actor * splits + split
    eps = apex_epsilons(num_actors * splits * envs_per_split, epsilon, alpha).reshape(num_actors, splits, -1)
    return {(actor, split): np.repeat(eps[actor, split], agents) for actor in range(num_actors) for split in range(splits)}
