"""A sliding window over finished episodes (mean return and length of the last N), and the
per-row tally that finds where episodes end."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import numpy as np


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

    def add(self, returns: Iterable[float], lengths: Iterable[int]) -> None:
        """Add finished episodes; `returns` and `lengths` pair up one to one."""
        rets = [float(r) for r in returns]
        lens = [int(n) for n in lengths]
        if len(rets) != len(lens):
            raise ValueError(f"{len(rets)} returns but {len(lens)} lengths")
        if not rets:
            return
        self._returns.extend(rets)
        self._lengths.extend(lens)
        self.count += len(rets)
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
        if not done.any():
            return [], []
        ended = np.repeat(done.reshape(-1, self.agents).all(axis=1), self.agents)
        returns, lengths = self.running_return[ended].tolist(), self.running_length[ended].tolist()
        self.running_return[ended] = 0.0
        self.running_length[ended] = 0
        return returns, lengths

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
