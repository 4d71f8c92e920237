"""Hindsight experience replay (Andrychowicz et al., 2017) on the buffer worker's memory.

    actor segments --EpisodeAssembler--> whole episodes, stored contiguously, each transition
        with its step in the episode (her.step) and the episode's relabellable length (her.length)
    sample --> a k/(k+1) share of the batch rows get a goal achieved in their own episode:
        desired_goal in obs and next_obs replaced, reward = env.compute_reward(next achieved, goal)

Observations are `srl.envs.goals.GoalObservation` vectors [observation | achieved | desired].
Goals are drawn at sampling time, as SB3's HerReplayBuffer does, rather than stored k times at
episode end. Measured for FetchReach (16-float observations, 4 actions, batch 256, k = 4, on the
2-core VM under load): sampling a batch takes 0.34 ms with relabelling against 0.16 ms without
(compute_reward on the ~205 relabelled rows 0.03 ms), beside ~8.8 ms per SAC update in the
fetchreach-sac-her run; a transition takes 160 bytes here (152 + her.step and her.length),
where storing k = 4 relabelled copies at episode end would take 760 bytes per env step, 4.75x
the memory for one fixed set of goals. Every replay of a transition draws new goals.

Strategies (for a transition at step t of an episode whose transitions 0..m-1 have a stored next
observation): `future` takes the achieved goal after a step in [t, m), `final` after step m-1,
`episode` after a step in [0, m). A goal never comes from another episode: episodes are stored
whole and contiguously, the goal's stamp is the transition's own minus t plus the chosen step,
and a goal whose transition was overwritten since (only `episode` can reach back that far)
leaves the row with its own goal.

An episode's last transition keeps its own goal: its next observation is not stored (the actor
resets on the step it ends, srl.data.nstep), so neither its achieved goal nor a relabelled reward
is known; m = length - 1. Only 1-step transitions: with n > 1 a relabelled return would need every
reward of the n steps recomputed (srl.config.checks refuses replay.n_step > 1 with her).

Episodes still running are held by the assembler, not the memory: a checkpoint saves the memory
(with the her.* columns), and the steps of episodes that were running are lost on a restart.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.replay import ReplayMemory, Transitions, segment_transitions
from srl.envs.goals import GoalLayout, RewardFn

STEP = "her.step"  # the transition's step in its episode
LENGTH = "her.length"  # transitions of its episode that have a stored next observation (length - 1)
STRATEGIES = ("future", "final", "episode")


def her_fields() -> dict[str, FieldSpec]:
    return {STEP: FieldSpec((), np.int32), LENGTH: FieldSpec((), np.int32)}


class EpisodeAssembler:
    """Collects each env row's 1-step transitions across segments until its episode ends, then
    hands the whole episode over, its transitions in order, with her.step and her.length.

    A lane is one (actor, split, epoch): a restarted actor's new episodes never join an old one's."""

    def __init__(self, gamma: float) -> None:
        self.gamma = gamma
        self.lanes: dict[Hashable, list[list[Transitions]]] = {}  # lane -> row -> steps of its running episode

    def __call__(self, segment: dict[str, np.ndarray], lane: Hashable) -> Transitions:
        T, rows = segment[C.REWARD].shape[0] - 1, segment[C.REWARD].shape[1]
        steps = segment_transitions(segment, self.gamma, 1)  # step-major: row r of step t at t * rows + r
        running = self.lanes.setdefault(lane, [[] for _ in range(rows)])
        ended = segment[C.TERMINATED][:T].astype(bool) | segment[C.TRUNCATED][:T].astype(bool)
        episodes: list[Transitions] = []
        for r in range(rows):
            start = 0
            for end in np.flatnonzero(ended[:, r]):
                running[r].append(_rows(steps, np.arange(start, end + 1) * rows + r))
                episodes.append(_episode(running[r]))
                running[r] = []
                start = end + 1
            if start < T:
                running[r].append(_rows(steps, np.arange(start, T) * rows + r))
        if not episodes:
            return {**{name: a[:0] for name, a in steps.items()}, STEP: np.zeros(0, np.int32),
                    LENGTH: np.zeros(0, np.int32)}
        return {name: np.concatenate([e[name] for e in episodes]) for name in episodes[0]}

    def running_steps(self) -> int:
        return sum(len(part[C.REWARD]) for rows in self.lanes.values() for row in rows for part in row)


def _rows(transitions: Transitions, index: np.ndarray) -> Transitions:
    return {name: a[index] for name, a in transitions.items()}


def _episode(parts: list[Transitions]) -> Transitions:
    episode = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    n = len(episode[C.REWARD])
    episode[STEP] = np.arange(n, dtype=np.int32)
    episode[LENGTH] = np.full(n, n - 1, np.int32)
    return episode


class HerReplayMemory(ReplayMemory):
    """A uniform replay memory of whole episodes that relabels goals as it samples (module doc)."""

    def __init__(self, fields: dict[str, FieldSpec], capacity: int, layout: GoalLayout, compute_reward: RewardFn,
                 strategy: str = "future", k: int = 4, seed: int = 0) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        super().__init__({**fields, **her_fields()}, capacity, prioritized=False, seed=seed)
        self.batch_columns = tuple(fields)  # her.* stay in the memory (and its checkpoint), not in batches
        self.layout, self.compute_reward = layout, compute_reward
        self.strategy, self.relabel_share = strategy, k / (k + 1)
        self.relabelled = 0  # rows given a new goal, for the report

    def sample(self, out: dict[str, np.ndarray]) -> None:
        super().sample(out)
        index = out[C.INDEX]
        step, length = self.data[STEP][index], self.data[LENGTH][index]
        rows = np.flatnonzero((self.rng.random(len(index)) < self.relabel_share) & (step < length))
        if rows.size == 0:
            return
        step, length = step[rows].astype(np.int64), length[rows].astype(np.int64)
        if self.strategy == "future":
            chosen = self.rng.integers(step, length)
        elif self.strategy == "final":
            chosen = length - 1
        else:
            chosen = self.rng.integers(0, length)
        goal_stamp = out[C.STAMP][rows] - step + chosen
        goal_index = goal_stamp % self.capacity
        kept = self.stamp[goal_index] == goal_stamp  # else overwritten since: the row keeps its goal
        rows, goal_index = rows[kept], goal_index[kept]
        self.relabel(out, rows, self.data[C.NEXT_OBS][goal_index, self.layout.achieved])

    def relabel(self, out: dict[str, np.ndarray], rows: np.ndarray, goals: np.ndarray) -> None:
        """Give batch rows `rows` the desired goals `goals` and the rewards the env computes for them."""
        desired, achieved = self.layout.desired, self.layout.achieved
        out[C.OBS][rows, desired] = goals
        out[C.NEXT_OBS][rows, desired] = goals
        reward = self.compute_reward(out[C.NEXT_OBS][rows, achieved], goals, None)
        out[C.REWARD][rows] = np.asarray(reward, np.float32).reshape(len(rows))
        self.relabelled += len(rows)
