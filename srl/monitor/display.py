"""A live terminal table of a run's progress, and the final summary table.

    with LiveDisplay("cartpole-ppo", enabled=True) as display:
        while training:
            display.update(metrics)      # the same dict the Recorder writes
    print_summary(summary)

The live table shows only in a terminal: with `enabled=False`, or when the console is not a
terminal (output piped to a file, CI), `LiveDisplay` does nothing at all, prints nothing and
starts no thread.

Metric names are looked up as given, then by their last "/" segment, so both
`episode_return_mean` and `charts/episode_return_mean` are found. The rows and the names each
row reads, first match wins:

    env steps           env_steps
    env steps/s         env_steps_per_s, sps   (else computed from env_steps between updates)
    mean return (100)   episode_return_mean
    episodes            episodes
    policy version      policy_version
    updates             updates
    policy lag (mean)   policy_lag_mean
    elapsed             time_s                 (else the time since the display started)
    progress            progress               (text: "12.5% of total_env_steps", srl.monitor.progress)
    ETA                 eta                    (text: "7:56" or "-")
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from srl.monitor.recorder import as_float

REFRESH_PER_S = 2

# (row label, metric names to try in order, how to format the value)
_ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("env steps", ("env_steps",), "int"),
    ("env steps/s", ("env_steps_per_s", "sps"), "rate"),
    ("mean return (last 100)", ("episode_return_mean",), "float"),
    ("episodes", ("episodes",), "int"),
    ("policy version", ("policy_version",), "int"),
    ("updates", ("updates",), "int"),
    ("policy lag (mean)", ("policy_lag_mean",), "float"),
    ("elapsed", ("time_s",), "duration"),
    ("progress", ("progress",), "text"),
    ("ETA", ("eta",), "text"),
)


def _lookup(metrics: Mapping[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if name in metrics and metrics[name] is not None:
            return metrics[name]
    for name in names:
        for key, value in metrics.items():
            # eval/ metrics describe other episodes than the training rows: never a stand-in
            if value is not None and key.rsplit("/", 1)[-1] == name and not key.startswith("eval/"):
                return value
    return None


def format_duration(seconds: float) -> str:
    """`H:MM:SS` (or `M:SS` under an hour)."""
    total = int(max(seconds, 0.0))
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _format(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    f = as_float(value)
    if f is None:
        return str(value)
    if not math.isfinite(f):
        return str(f)
    if kind == "int":
        return f"{int(f):,}"
    if kind == "rate":
        return f"{f:,.0f}"
    if kind == "duration":
        return format_duration(f)
    return f"{f:,.2f}"


class LiveDisplay:
    """A context manager that keeps a compact progress table on screen while a run goes.

    `console` defaults to a new `rich.console.Console()` (standard output); pass one to draw
    elsewhere. The table is redrawn twice a second and left on screen at exit (not transient).
    """

    def __init__(self, experiment: str, enabled: bool, console: Console | None = None) -> None:
        self.experiment = experiment
        self.console = console if console is not None else Console()
        self.enabled = bool(enabled) and self.console.is_terminal
        self._live: Live | None = None
        self._start = time.monotonic()
        self._metrics: dict[str, Any] = {}
        self._last_steps: tuple[float, float] | None = None  # (monotonic time, env_steps)
        self._rate: float | None = None

    def __enter__(self) -> LiveDisplay:
        if self.enabled:
            self._start = time.monotonic()
            self._live = Live(
                self._render(),
                console=self.console,
                refresh_per_second=REFRESH_PER_S,
                transient=False,
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.update(self._render(), refresh=True)
            live.__exit__(None, None, None)

    def update(self, metrics: Mapping[str, Any]) -> None:
        """Show these metrics from the next redraw on (a no-op when disabled)."""
        if not self.enabled:
            return
        self._metrics = dict(metrics)
        steps = as_float(_lookup(self._metrics, ("env_steps",)))
        if steps is not None:
            now = time.monotonic()
            if self._last_steps is not None and now > self._last_steps[0] and steps >= self._last_steps[1]:
                self._rate = (steps - self._last_steps[1]) / (now - self._last_steps[0])
            self._last_steps = (now, steps)
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> Table:
        # Text, not str, everywhere: a str cell is parsed as rich markup, and a "[...]" in an experiment
        # name or a value would vanish from the screen
        title = Text(f"srl · {self.experiment}")
        table = Table(title=title, show_header=False, title_justify="left", expand=False)
        table.add_column("metric", style="bold cyan", no_wrap=True)
        table.add_column("value", justify="right", no_wrap=True)
        for label, names, kind in _ROWS:
            value = _lookup(self._metrics, names)
            if value is None and kind == "rate":
                value = self._rate
            if value is None and kind == "duration":
                value = time.monotonic() - self._start
            table.add_row(label, Text(_format(value, kind)))
        return table


def print_summary(summary: Mapping[str, Any], console: Console | None = None, title: str = "summary") -> None:
    """Print a run's final summary as a two-column table (nested dicts are flattened with '/')."""
    console = console if console is not None else Console()
    table = Table(title=Text(title), show_header=False, title_justify="left")
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("value", justify="right")

    def rows(prefix: str, obj: Mapping[str, Any]):
        for key, value in obj.items():
            name = f"{prefix}{key}"
            if isinstance(value, Mapping):
                yield from rows(f"{name}/", value)
            else:
                yield name, value

    for name, value in rows("", summary):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            text = "-" if value is None else str(value)
        elif name.rsplit("/", 1)[-1] in ("time_s", "elapsed_s", "wall_time_s"):
            text = f"{_format(value, 'float')} ({format_duration(float(value))})"
        else:
            text = _format(value, "int" if isinstance(value, numbers.Integral) else "float")
        table.add_row(Text(name), Text(text))  # plain text: an error's "[...]" is not markup
    console.print(table)
