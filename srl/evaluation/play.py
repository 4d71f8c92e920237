"""The one play loop: players acting together in one `VectorEnv` until N episodes are played.

Every evaluation steps this loop: `srl eval` (one policy, several, a turn-based match, the random
baseline), the in-run evaluator (srl.workers.evaluator, a few steps per poll) and an ensemble
member's evaluation (srl.workers.member). Each player acts for its rows (srl.evaluation.players);
one player of every row gets its actions to the env as they come, with no copy.

Episodes are shared out over the envs before the first step (env i plays episodes // envs, one
more for the first episodes % envs), so every env plays a fixed number of whole episodes and a
short episode cannot crowd a long one out; an env past its share goes on stepping, uncounted. An
env's episode ends on the step where all its rows are done (srl.envs.vector: an agent done before
the others is marked again at the end).

Measured (benchmarks/eval_speed.py, py-spy): the loop costs about one policy forward and one env
step per step; the rest (the done flags, the running returns) is a few numpy operations over the
rows. `play` runs in inference mode, so a `Player` enters no context per step (docs/results.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from srl.api.env import VectorEnv
from srl.evaluation.players import Actor
from srl.spaces import Obs


@dataclass
class Episode:
    env: int  # which env of the VectorEnv played it
    returns: np.ndarray  # [agents]: each of the env's rows' return


class Match:
    """The loop, a step at a time (the in-run evaluator plays a few steps per poll).

    `obs`: the env's current observation, to go on from where a previous match left the env (a
    match ends on an episode's end, so the next starts a fresh episode); else the env is reset
    with `seed` (env i with seed + i, srl.envs.vector)."""

    def __init__(self, env: VectorEnv, players: Sequence[Actor], episodes: int, seed: int = 0,
                 obs: Obs | None = None) -> None:
        if episodes < 1:
            raise ValueError(f"a match plays >= 1 episode, got {episodes}")
        self.env, self.players, self.episodes = env, list(players), episodes
        envs = env.num_envs
        self.agents = env.num_rows // envs
        self.share = np.array([episodes // envs + (i < episodes % envs) for i in range(envs)])
        self.played = np.zeros(envs, np.int64)
        self.running = np.zeros(env.num_rows)  # each row's return so far in its episode
        self.finished: list[Episode] = []
        self.steps = 0
        self.obs = env.reset(seed=seed) if obs is None else obs
        self._one = len(self.players) == 1 and isinstance(self.players[0].rows, slice)

    @property
    def done(self) -> bool:
        return len(self.finished) >= self.episodes

    def step(self) -> bool:
        """One env step; True once every env has played its share."""
        step = self.env.step(self._actions())
        self.obs = step.obs
        self.steps += 1
        ended = step.terminated | step.truncated
        for player in self.players:
            player.episodes_ended(ended[player.rows])
        self.running += step.reward
        if not np.count_nonzero(ended):  # a C call: ndarray.any() goes through numpy's Python _methods
            return False
        for env in np.flatnonzero(ended.reshape(-1, self.agents).all(axis=1)):
            rows = slice(env * self.agents, (env + 1) * self.agents)
            if self.played[env] < self.share[env]:
                self.finished.append(Episode(int(env), self.running[rows].copy()))
                self.played[env] += 1
            self.running[rows] = 0.0
        return self.done

    def _actions(self) -> np.ndarray:
        if self._one:  # one player of every row: its actions as they are
            return np.asarray(self.players[0].act(self.obs))
        mine = [np.asarray(player.act(self.obs)) for player in self.players]
        action = np.zeros((self.env.num_rows, *mine[0].shape[1:]), mine[0].dtype)
        for player, actions in zip(self.players, mine):
            action[player.rows] = actions
        return action


def play(env: VectorEnv, players: Sequence[Actor], episodes: int, seed: int,
         before_step: Callable[[], None] | None = None) -> list[Episode]:
    """`episodes` whole episodes of `players` in `env` (reset with `seed`), in the order they
    ended. `before_step` runs before each step (a video's frame of the state acted in)."""
    match = Match(env, players, episodes, seed)
    # Inference mode once, not a context per step in each Player.act. Not no_grad: a CartPole MLP's
    # forward took 99 us under no_grad against 70 us in inference mode (no version counters).
    with torch.inference_mode():
        while True:
            if before_step is not None:
                before_step()
            if match.step():
                return match.finished
