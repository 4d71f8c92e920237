"""The run's stop rules, in one place: the controller, a lock-step trainer or pod and the pod driver ask them.

`StopRules` holds the run config's rules (`stop.target_return`, `stop.max_updates`,
`stop.total_env_steps`, `stop.time_limit_s`) and checks them in that order; what fired comes back
as a typed `Stop` (its kind, and the reason printed and written to summary.json), so no caller
tells the rules apart by the text of a reason.

Lock step: the controller's checks (srl.launch.monitor) read the workers' periodic reports, so the
update at which they fire depends on process timing: two deterministic runs could end after 23 and
24 updates. With `run.deterministic=true` the trainer (or a pod) decides instead (`LockStepStop`),
after each update and from what it trained on only: the env steps in the segments it consumed,
and the episodes that ended in them. Those are the same in every run, so every run stops after the
same update with the same parameters; the controller ends the run when a report carries the stop.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from srl.monitor.episodes import WINDOW  # episodes the target's mean is over
from srl.streams.reports import Key, StopReport

if TYPE_CHECKING:
    from srl.config import StopConfig



class StopKind(enum.Enum):
    """Which rule ended the run; the value is the config field (and the reason's first word)."""

    TARGET = "target_return"
    MAX_UPDATES = "max_updates"
    TOTAL_ENV_STEPS = "total_env_steps"
    TIME_LIMIT = "time_limit_s"


@dataclass(frozen=True)
class Stop:
    kind: StopKind
    reason: str  # as printed and in summary.json's stop_reason

    def report(self) -> StopReport:
        """The report fields that carry it to the controller (srl.launch.reports)."""
        return {Key.STOP_REASON: self.reason, Key.STOP_KIND: self.kind.value}

    @staticmethod
    def from_report(payload: StopReport) -> Stop | None:
        reason, kind = payload.get(Key.STOP_REASON), payload.get(Key.STOP_KIND)
        return Stop(StopKind(kind), reason) if reason and kind else None


@dataclass(frozen=True)
class StopRules:
    total_env_steps: int
    target_return: float | None = None
    max_updates: int | None = None
    time_limit_s: float | None = None
    time_limit_note: str = ""  # said after the time limit's reason: whose seconds, where not the run's
    window: int = WINDOW

    @classmethod
    def of(cls, stop: StopConfig) -> StopRules:
        note = "" if stop.time_limit_counts == "run" else f" (stop.time_limit_counts={stop.time_limit_counts})"
        return cls(stop.total_env_steps, stop.target_return, stop.max_updates, stop.time_limit_s, note)

    def target(self, mean: float | None, episodes: int, by: str = "") -> Stop | None:
        """The target, held against the mean return of the last `window` of `episodes` (none
        before there are that many): the run's, or `by` one worker's (an ensemble member)."""
        target = self.target_return
        if target is None or mean is None or episodes < self.window or mean < target:
            return None
        if by:
            return Stop(StopKind.TARGET, f"target_return {target} reached by {by} "
                                         f"(mean of its last {self.window} episodes: {mean:.2f})")
        return Stop(StopKind.TARGET, f"target_return {target} reached (mean of last {self.window} episodes: {mean:.2f})")

    def eval_target(self, returns: list[float]) -> Stop | None:
        """stop.target_on=eval: the target, held against the evaluator's last round."""
        if self.target_return is None or not returns:
            return None
        mean = sum(returns) / len(returns)
        if mean < self.target_return:
            return None
        return Stop(StopKind.TARGET, f"target_return {self.target_return} reached by the evaluator (mean of its "
                                     f"last round, {len(returns)} deterministic episodes: {mean:.2f})")

    def decide(self, updates: int, env_steps: int, elapsed_s: float | None = None,
               target: Stop | None = None) -> Stop | None:
        """The first rule that fires, in this order: the target (`target`, from `target()` or
        `eval_target()`), max_updates, total_env_steps, time_limit_s (`elapsed_s`: None, not counting yet)."""
        if target is not None:
            return target
        if self.max_updates is not None and updates >= self.max_updates:
            return Stop(StopKind.MAX_UPDATES, f"max_updates {self.max_updates} reached")
        if env_steps >= self.total_env_steps:
            return Stop(StopKind.TOTAL_ENV_STEPS, f"total_env_steps {self.total_env_steps} reached")
        if self.time_limit_s is not None and elapsed_s is not None and elapsed_s >= self.time_limit_s:
            return Stop(StopKind.TIME_LIMIT, f"time_limit_s {self.time_limit_s} reached{self.time_limit_note}")
        return None


class LockStepStop:
    """The rules checked at an update boundary, from the trained data: the episodes' returns in
    a fixed order, so the target's window is the same in every run (no time limit: srl.config.checks)."""

    def __init__(self, rules: StopRules) -> None:
        self.rules = rules
        self.returns: deque[float] = deque(maxlen=rules.window)
        self.episodes = 0  # every episode seen, not only those in the window
        self.stop: Stop | None = None  # set once: the run is over

    @property
    def reason(self) -> str | None:
        return None if self.stop is None else self.stop.reason

    def after_update(self, updates: int, env_steps: int, returns: Iterable[float]) -> Stop | None:
        """Feed an update: the updates and env steps trained on so far, and the returns of the
        episodes that ended in its data (in a fixed order). The stop now, or None."""
        if self.stop is None:
            for value in returns:
                self.returns.append(float(value))
                self.episodes += 1
            mean = sum(self.returns) / len(self.returns) if self.returns else None
            self.stop = self.rules.decide(updates, env_steps, target=self.rules.target(mean, self.episodes))
        return self.stop

    def after_summary(self, updates: int, env_steps: int, episodes: int, window_mean: float) -> Stop | None:
        """`after_update` from a summary kept on the device (a pod's, srl.workers.pod): every
        episode seen so far and the mean return of the last `window` of them (any value before
        `window` episodes)."""
        if self.stop is None:
            self.episodes = episodes
            self.stop = self.rules.decide(updates, env_steps, target=self.rules.target(window_mean, episodes))
        return self.stop

    @property
    def window(self) -> int:
        return self.rules.window

    def report(self) -> StopReport:
        """For the worker's report: the stop once decided (srl.launch.monitor reads it)."""
        return {Key.STOP_REASON: None} if self.stop is None else self.stop.report()
