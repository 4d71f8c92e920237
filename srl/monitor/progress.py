"""How far a run is toward its stop rules, and when it will get there.

    meter = ProgressMeter(Limits(total_env_steps=1_000_000, time_limit_s=600))
    estimate = meter.observe(elapsed_s=12.0, env_steps=24_576, updates=12)
    estimate.eta_s, estimate.limit   # 476.3, "total_env_steps"
    format_eta(estimate)             # "ETA 7:56"

The ETA is toward whichever limit comes first at the recent rate: env steps and updates are
extrapolated from the samples of the last `window_s` seconds (a run's first seconds, startup and
warmup, do not drag it down for long), the time limit needs no rate. A target return has no ETA
(a return does not rise at a steady rate), so a run with only a target says "ETA -", as does a run
whose rate is not known yet.

`PlainProgress` writes one plain line per `interval_s` for logs (nohup, CI, a pipe): no colour, no
markup, no cursor movement, flushed at once.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, TextIO

from srl.monitor.display import format_duration

RATE_WINDOW_S = 30.0


@dataclass(frozen=True)
class Limits:
    """The stop rules a run has; None = not set."""

    total_env_steps: float | None = None
    max_updates: float | None = None
    time_limit_s: float | None = None
    target_return: float | None = None
    target_on: str = "training"  # or "eval": the evaluator's rounds (stop.target_on)


@dataclass(frozen=True)
class Estimate:
    """`fraction` (0..1) and `eta_s` are toward `limit`, the limit reached first at the current rate
    (the furthest along when no ETA is known); `steps_per_s` is over the recent window."""

    limit: str | None
    fraction: float | None
    eta_s: float | None
    steps_per_s: float | None


class ProgressMeter:
    """Keeps (elapsed_s, env_steps, updates) samples of the last `window_s` seconds."""

    def __init__(self, limits: Limits, window_s: float = RATE_WINDOW_S) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.limits = limits
        self.window_s = window_s
        self._samples: deque[tuple[float, float, float]] = deque()

    def observe(self, elapsed_s: float, env_steps: float, updates: float) -> Estimate:
        """Add a sample (elapsed_s since the run's clock started) and estimate from the window."""
        samples = self._samples
        if samples and elapsed_s < samples[-1][0]:
            samples.clear()  # a clock that went back: start the window again
        samples.append((elapsed_s, env_steps, updates))
        # keep one sample at or before the window's start, so the window spans window_s
        while len(samples) > 2 and samples[1][0] <= elapsed_s - self.window_s:
            samples.popleft()
        step_rate, update_rate = self._rates()
        lim = self.limits
        toward = [  # (limit, fraction, eta_s)
            _toward("total_env_steps", lim.total_env_steps, env_steps, step_rate),
            _toward("max_updates", lim.max_updates, updates, update_rate),
            _toward("time_limit_s", lim.time_limit_s, elapsed_s, 1.0),
        ]
        candidates = [c for c in toward if c is not None]
        timed = [(name, done, eta) for name, done, eta in candidates if eta is not None]
        if timed:
            return Estimate(*min(timed, key=lambda c: c[2]), step_rate)
        if candidates:
            return Estimate(*max(candidates, key=lambda c: c[1]), step_rate)
        return Estimate(None, None, None, step_rate)

    def _rates(self) -> tuple[float | None, float | None]:
        """Env steps and updates per second between the window's first and last samples."""
        if len(self._samples) < 2:
            return None, None
        (t0, steps0, updates0), (t1, steps1, updates1) = self._samples[0], self._samples[-1]
        if t1 <= t0:
            return None, None
        return max(steps1 - steps0, 0.0) / (t1 - t0), max(updates1 - updates0, 0.0) / (t1 - t0)


def _toward(
    name: str, limit: float | None, value: float, rate: float | None
) -> tuple[str, float, float | None] | None:
    """(name, fraction done, seconds left at `rate`) toward one limit; None when it is not set."""
    if limit is None or limit <= 0:
        return None
    fraction = min(max(value / limit, 0.0), 1.0)
    left = max(limit - value, 0.0)
    if left == 0:
        return name, fraction, 0.0
    eta_s = left / rate if rate is not None and rate > 0 else None
    return name, fraction, eta_s


def format_eta(estimate: Estimate) -> str:
    # rounded up: "ETA 0:00" only when the limit is reached
    return "ETA -" if estimate.eta_s is None else f"ETA {format_duration(math.ceil(estimate.eta_s))}"


def format_fraction(estimate: Estimate) -> str:
    """'12.5% of total_env_steps', or '-' for a run with no budget to measure against."""
    if estimate.fraction is None or estimate.limit is None:
        return "-"
    return f"{100 * estimate.fraction:.1f}% of {estimate.limit}"


def _number(value: Any, digits: int) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def progress_line(experiment: str, metrics: dict[str, Any], estimate: Estimate, limits: Limits,
                  elapsed_s: float) -> str:
    """One plain log line: `srl NAME: 12288 env steps, 2034 steps/s, 24 updates, return 23.51
    (target 475), 1.2% of total_env_steps, elapsed 0:06, ETA 8:05`; the watched info keys' means
    follow the return (`return -4.10, is_success 0.85`); with several policies the
    return is followed by each one's (`return 0.00 (learner 0.47, league -0.47)`)."""
    steps_per_s = estimate.steps_per_s if estimate.steps_per_s is not None else metrics.get("env_steps_per_s")
    target = f" (target {limits.target_return:g})" if limits.target_return is not None else ""
    returns = f"return {_number(metrics.get('episode_return_mean'), 2)}{_per_policy(metrics)}"
    if "eval/episode_return_mean" in metrics:  # an evaluator runs: its last round's deterministic return
        evaluated = f"eval {_number(metrics['eval/episode_return_mean'], 2)}"
        returns = f"{returns}{target}, {evaluated}" if limits.target_on == "training" else f"{returns}, {evaluated}{target}"
    else:
        returns += target
    returns += _info_means(metrics)
    return (
        f"srl {experiment}: {_number(metrics.get('env_steps'), 0)} env steps, {_number(steps_per_s, 0)} steps/s, "
        f"{_number(metrics.get('updates'), 0)} updates, {returns}, {format_fraction(estimate)}, "
        f"elapsed {format_duration(elapsed_s)}, {format_eta(estimate)}"
    )


def _info_means(metrics: dict[str, Any]) -> str:
    """`, is_success 0.85` for each info key watched (monitor.info_keys, srl.monitor.info) with a value."""
    from srl.monitor.info import PREFIX

    return "".join(f", {key[len(PREFIX):]} {_number(value, 2)}" for key, value in sorted(metrics.items())
                   if key.startswith(PREFIX))


def _per_policy(metrics: dict[str, Any]) -> str:
    """` (predator 31.80, prey -40.12)` for a run with several policies: the mean over every agent
    says little there (0 in a zero-sum game, whoever wins); '' otherwise."""
    suffix = "/episode_return_mean"
    returns = {key[: -len(suffix)]: value for key, value in metrics.items()
               if key.endswith(suffix) and key.count("/") == 1 and not key.startswith("eval/")}
    if not returns:
        return ""
    return " (" + ", ".join(f"{policy} {_number(value, 2)}" for policy, value in sorted(returns.items())) + ")"


class PlainProgress:
    """Writes a progress line to `stream` at most once per `interval_s` (of the run's elapsed time),
    the first once `interval_s` has passed."""

    def __init__(self, stream: TextIO, interval_s: float) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self._next_s = interval_s

    def maybe_write(self, elapsed_s: float, line: str) -> bool:
        if elapsed_s < self._next_s:
            return False
        # the next one interval_s after this one: a slow tick does not bring a burst of lines
        self._next_s = elapsed_s + self.interval_s
        self.stream.write(line + "\n")
        self.stream.flush()  # a pipe or a file is block-buffered: a log reader sees the line now
        return True
