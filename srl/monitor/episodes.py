"""A sliding window over finished episodes: mean return and length of the last N."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


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
