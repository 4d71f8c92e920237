"""A sliding window over finished episodes (mean return and length of the last N), and the
per-row tally that finds where episodes end."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np

from srl.streams.reports import Episodes, Key

WINDOW = 100  # episodes in a run's return window: the target is met by the mean of the last 100


def episodes_report(returns: list[float], lengths: list[int]) -> Episodes:
    """The report fields of episodes finished since the last report: every one counted, only the
    last WINDOW carried, which is all any window keeps of them. (A ring of 1024 CartPole envs
    finishes ~100k episodes a second: as JSON lists they cost the actor and the controller
    several per cent of a core.)"""
    return {Key.EPISODES: len(returns), Key.EPISODE_RETURNS: returns[-WINDOW:], Key.EPISODE_LENGTHS: lengths[-WINDOW:]}


class ReturnWindow:
    """Returns and lengths of the last `size` finished episodes.

    `add` takes any number of finished episodes at once (a batch of them from a vectorised
    environment); `count` is every episode ever added, not only those still in the window.
    Means are cached between additions, so reading them in a reporting loop costs nothing.
    """

    def __init__(self, size: int = 100) -> None:
        if size < 1:
            raise ValueError(f"ReturnWindow size must be >= 1, got {size}")
        self.size = size
        self._returns: deque[float] = deque(maxlen=size)
        self._lengths: deque[int] = deque(maxlen=size)
        self.count = 0
        self._mean_return: float | None = None
        self._mean_length: float | None = None
        self._stale = False

    def add(self, returns: Iterable[float], lengths: Iterable[int], count: int | None = None) -> None:
        """Add finished episodes; `returns` and `lengths` pair up one to one. `count`: how many
        episodes finished, of which these are the last (a report's `episodes_report`; no more
        than `size` of them can stay in the window anyway)."""
        rets = [float(r) for r in returns]
        lens = [int(n) for n in lengths]
        if len(rets) != len(lens):
            raise ValueError(f"{len(rets)} returns but {len(lens)} lengths")
        count = len(rets) if count is None else count
        if count < len(rets) or len(rets) < min(count, self.size):
            raise ValueError(f"{count} episodes but only {len(rets)} of their returns, fewer than the window's {self.size}")
        if not count:
            return
        self._returns.extend(rets)
        self._lengths.extend(lens)
        self.count += count
        self._stale = True

    def _refresh(self) -> None:
        if self._stale:
            n = len(self._returns)
            self._mean_return = sum(self._returns) / n
            self._mean_length = sum(self._lengths) / n
            self._stale = False

    @property
    def mean_return(self) -> float | None:
        """Mean return of the episodes in the window; None before the first episode."""
        self._refresh()
        return self._mean_return

    @property
    def mean_length(self) -> float | None:
        """Mean length (steps) of the episodes in the window; None before the first episode."""
        self._refresh()
        return self._mean_length

    def __len__(self) -> int:
        """Episodes currently in the window (at most `size`)."""
        return len(self._returns)

    def __repr__(self) -> str:
        return (
            f"ReturnWindow(size={self.size}, count={self.count}, "
            f"mean_return={self.mean_return}, mean_length={self.mean_length})"
        )


class EpisodeTally:
    """Running return and length of each row, and the episodes they finish.

    Rows are env-major (an env's `agents` rows are adjacent). An env's episode ends when all its
    agents are done (an agent done early may repeat its flag until then); each agent's return
    then counts as one finished episode. Actors count their ring's episodes with it, and a
    deterministic trainer the episodes in the segments it trained on (srl.workers.stop).
    """

    def __init__(self, rows: int, agents: int = 1) -> None:
        self.agents = agents
        self.running_return = np.zeros(rows, np.float64)
        self.running_length = np.zeros(rows, np.int64)

    def step(self, reward: np.ndarray, done: np.ndarray) -> tuple[list[float], list[int]]:
        """One step of every row: (returns, lengths) of the episodes it ended, in row order."""
        self.running_return += reward
        self.running_length += 1
        rows = self.ended(done).nonzero()[0]
        if not len(rows):
            return [], []
        returns, lengths = self.running_return[rows].tolist(), self.running_length[rows].tolist()
        self.running_return[rows] = 0.0
        self.running_length[rows] = 0
        return returns, lengths

    def ended(self, done: np.ndarray) -> np.ndarray:
        """[rows] bool: the rows whose env's episode this step ends (every agent of it done)."""
        # (an actor's every step: one agent needs no regrouping)
        return done if self.agents == 1 else np.repeat(done.reshape(-1, self.agents).all(axis=1), self.agents)

    def drop(self, rows: np.ndarray) -> None:
        """Forget the running episodes of `rows` (cut short; their return is not one to count)."""
        self.running_return[rows] = 0.0
        self.running_length[rows] = 0

    def steps(self, rewards: np.ndarray, dones: np.ndarray) -> tuple[list[float], list[int]]:
        """Steps 0, 1, ... of [steps, rows] arrays in turn: the episodes ended, in (step, row) order."""
        returns: list[float] = []
        lengths: list[int] = []
        for reward, done in zip(rewards, dones):
            ended = self.step(reward, done)
            returns += ended[0]
            lengths += ended[1]
        return returns, lengths
