"""Info keys as metrics (`monitor.info_keys`): the value an env's `info` holds for each key at
an episode's last step, averaged over the last WINDOW episodes, as `info/<key>` in metrics.jsonl,
TensorBoard and the trackers, summary.json's `info` and the progress line. `is_success` and
`success`, which goal-conditioned envs report (gymnasium-robotics' Fetch and PointMaze), are
watched by default: their mean is the success rate. A key an env never reports shows nothing.

The path is the episode returns': an env writes each watched key's value at the step that ends an
episode (EndedInfo, per row: NaN where the episode did not end or the info lacks the key, or holds
no number), the actor keeps the values of the episodes it counts and reports the last WINDOW of
them per key (`episode_info`), the controller checks them as it checks returns
(srl.launch.reports) and keeps a window per key (InfoWindows).

Envs that report info: the Gymnasium envs of the loop backend (srl.envs.gym_env.GymVectorEnv) and
srl `Environment`s (SerialVectorEnv: an agent's own info). The natively batched backends (vector,
envpool, batched) report none: the key shows no value.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

from srl.monitor.episodes import WINDOW

MAX_INFO_KEYS = 16  # a report carries WINDOW values per key: bounded like the returns it rides with
KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")  # a metric name's part: no '/', no spaces
PREFIX = "info/"


def info_keys_problem(keys: list[str]) -> str | None:
    """Why `monitor.info_keys` cannot be used, or None (srl.config.checks)."""
    if len(keys) > MAX_INFO_KEYS:
        return f"field 'monitor.info_keys': {len(keys)} keys, at most {MAX_INFO_KEYS}"
    bad = [k for k in keys if not KEY_PATTERN.match(k)]
    if bad:
        return (f"field 'monitor.info_keys': {bad} are not info key names (letters, digits, _ . -, starting "
                "with a letter or _, at most 64 characters)")
    if len(set(keys)) != len(keys):
        return f"field 'monitor.info_keys': {keys} names a key twice"
    return None


def info_number(value: Any) -> float:
    """An info value as a float (bool, int, float, a numpy scalar or 1-element array); NaN otherwise."""
    try:
        number = float(np.asarray(value, dtype=np.float64).reshape(()))
    except (TypeError, ValueError):
        return math.nan
    return number


class EndedInfo:
    """Per watched key, [rows] float64: its info value at the step that ended each row's episode
    (NaN elsewhere). An env calls `clear` before a step and `put` for each row whose episode the
    step ends."""

    def __init__(self, keys: tuple[str, ...], rows: int) -> None:
        self.keys = keys
        self.values = {key: np.full(rows, math.nan) for key in keys}
        self._written = False

    def clear(self) -> None:
        if self._written:
            for values in self.values.values():
                values.fill(math.nan)
            self._written = False

    def put(self, row: int, info: Mapping[str, Any] | None) -> None:
        if not info:
            return
        for key in self.keys:
            if key in info:
                self.values[key][row] = info_number(info[key])
                self._written = True


def ended_values(ended: EndedInfo | None, rows: np.ndarray) -> dict[str, list[float]]:
    """The watched keys' finite values at `rows` (the rows whose episode the actor counted)."""
    if ended is None or not len(rows):
        return {}
    out = {}
    for key, values in ended.values.items():
        mine = values[rows]
        mine = mine[np.isfinite(mine)]
        if len(mine):
            out[key] = mine.tolist()
    return out


def add_values(kept: dict[str, list[float]], new: Mapping[str, list[float]]) -> None:
    """Append each key's new values, keeping only the last WINDOW (all a report carries)."""
    for key, values in new.items():
        kept[key] = (kept.get(key, []) + list(values))[-WINDOW:]


def episode_info_ok(value: Any) -> bool:
    """A report's `episode_info`: at most MAX_INFO_KEYS keys of key names, each at most WINDOW reals."""
    if type(value) is not dict or len(value) > MAX_INFO_KEYS:
        return False
    return all(type(k) is str and KEY_PATTERN.match(k) and type(v) is list and len(v) <= WINDOW
               and all(type(x) in (int, float) for x in v) for k, v in value.items())


class InfoWindows:
    """The controller's window per info key: the values of the last WINDOW episodes that had one."""

    def __init__(self) -> None:
        self.windows: dict[str, deque[float]] = {}

    def add(self, episode_info: Mapping[str, list[float]]) -> None:
        for key, values in episode_info.items():
            self.windows.setdefault(key, deque(maxlen=WINDOW)).extend(float(v) for v in values)

    def means(self) -> dict[str, float]:
        """info/<key> -> the mean of its window, for each key seen."""
        return {PREFIX + key: sum(w) / len(w) for key, w in sorted(self.windows.items()) if w}
