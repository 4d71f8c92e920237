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
            self.reason = self._decide(updates, env_steps)
        return self.reason

    def _decide(self, updates: int, env_steps: int) -> str | None:
        if self.target_return is not None and self.episodes >= self.window:
            mean = sum(self.returns) / len(self.returns)
            if mean >= self.target_return:
                return (f"target_return {self.target_return} reached "
                        f"(mean of last {self.window} episodes: {mean:.2f})")  # fmt: skip
        if self.max_updates is not None and updates >= self.max_updates:
            return f"max_updates {self.max_updates} reached"
        if env_steps >= self.total_env_steps:
            return f"total_env_steps {self.total_env_steps} reached"
        return None
