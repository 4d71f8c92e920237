"""Lock-step stop rules: a deterministic run stops where its trainer decides, not the controller.

The controller's rules (srl.launch.monitor) read the workers' periodic reports, so the update
at which they fire depends on process timing: two deterministic runs could end after 23 and 24
updates. With `run.deterministic=true` the trainer (or a pod) decides instead, after each update and
from what it trained on only: the env steps in the segments it consumed, and the episodes that
ended in them. Those are the same in every run, so every run stops after the same update with
the same parameters; the controller ends the run when a report carries the reason.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable


class LockStepStop:
    """The stop rules of the run config (`max_updates`, `total_env_steps`, `target_return` over
    the last `window` episodes), checked in the monitor's order at an update boundary."""

    def __init__(
        self, total_env_steps: int, target_return: float | None = None, max_updates: int | None = None,
        window: int = 100,
    ) -> None:  # fmt: skip
        self.total_env_steps, self.target_return, self.max_updates = total_env_steps, target_return, max_updates
        self.window = window
        self.returns: deque[float] = deque(maxlen=window)
        self.episodes = 0  # every episode seen, not only those in the window
        self.reason: str | None = None  # set once: the run is over

    def after_update(self, updates: int, env_steps: int, returns: Iterable[float]) -> str | None:
        """Feed an update: the updates and env steps trained on so far, and the returns of the
        episodes that ended in its data (in a fixed order). The reason to stop now, or None."""
        if self.reason is None:
            for value in returns:
                self.returns.append(float(value))
                self.episodes += 1
            mean = sum(self.returns) / len(self.returns) if self.returns else None
            self.reason = self._decide(updates, env_steps, self.episodes, mean)
        return self.reason

    def after_summary(self, updates: int, env_steps: int, episodes: int, window_mean: float) -> str | None:
        """`after_update` from a summary kept on the device (a pod's, srl.workers.pod): every
        episode seen so far and the mean return of the last `window` of them (any value before
        `window` episodes)."""
        if self.reason is None:
            self.episodes = episodes
            self.reason = self._decide(updates, env_steps, episodes, window_mean)
        return self.reason

    def _decide(self, updates: int, env_steps: int, episodes: int, mean: float | None) -> str | None:
        target = self.target_return
        if target is not None and episodes >= self.window and mean is not None and mean >= target:
            return f"target_return {target} reached (mean of last {self.window} episodes: {mean:.2f})"
        if self.max_updates is not None and updates >= self.max_updates:
            return f"max_updates {self.max_updates} reached"
        if env_steps >= self.total_env_steps:
            return f"total_env_steps {self.total_env_steps} reached"
        return None
