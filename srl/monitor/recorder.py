"""Writes each report of a run to `metrics.jsonl` and to the run's trackers (TensorBoard, W&B...).

    rec = Recorder(run_dir, start_time_s=time.time(), trackers=[TensorBoardTracker(run_dir / "tb")])
    rec.write({"env_steps": 4096, "charts/episode_return_mean": 21.5, "losses/value_loss": 0.3})
    rec.close()

Every `write` appends one JSON object (one line) to `run_dir/metrics.jsonl`, with the metric
names as given plus `time_s` (seconds since `start_time_s`, rounded to the millisecond), and
flushes it, so a reader tailing the file sees each report at once. Every numeric metric (time_s
too) also goes to each tracker (srl.monitor.trackers) at step `metrics["env_steps"]`. The
trackers stay open after `close()`: their owner closes them once the run's artifacts are made.
"""

from __future__ import annotations

import json
import math
import numbers
import pathlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from srl.monitor.trackers import Tracker, tracker_errors
from srl.storage import failing_as

METRICS_FILE = "metrics.jsonl"


def _json_value(value: Any) -> Any:
    """A value JSON can hold exactly: numpy scalars become Python numbers, NaN/inf become null."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        return f if math.isfinite(f) else None
    if hasattr(value, "item"):  # a 0-d numpy array or torch tensor
        return _json_value(value.item())
    return str(value)


def as_float(value: Any) -> float | None:
    """The float a tracker (or the live table) gets for a metric: numpy and torch scalars
    included; None when the metric is not a number."""
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "item"):
        try:
            return as_float(value.item())
        except (ValueError, RuntimeError):
            return None
    return None


class Recorder:
    """Appends reports to `run_dir/metrics.jsonl` and mirrors numeric ones to `trackers`."""

    def __init__(self, run_dir: pathlib.Path, start_time_s: float, trackers: Sequence[Tracker] = ()) -> None:
        self.run_dir = pathlib.Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.start_time_s = float(start_time_s)
        self.metrics_path = self.run_dir / METRICS_FILE
        with failing_as(self.metrics_path):
            self._file = open(self.metrics_path, "a", encoding="utf-8")  # noqa: SIM115  (open for the run; close())
        self._lock = threading.Lock()
        self._writes = 0
        self._closed = False
        self.trackers = list(trackers)

    def write(self, metrics: dict[str, float | int | None]) -> None:
        """Record one report. `env_steps` is the trackers' step (the report count when absent)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("Recorder.write after close()")
            elapsed = round(time.time() - self.start_time_s, 3)
            row = {str(k): _json_value(v) for k, v in metrics.items()}
            row["time_s"] = elapsed
            with failing_as(self.metrics_path):  # a full disk, an I/O error: WriteFailed names the file
                self._file.write(json.dumps(row, allow_nan=False) + "\n")
                self._file.flush()
            self._writes += 1
            if self.trackers:
                step_value = as_float(metrics.get("env_steps"))
                step = int(step_value) if step_value is not None else self._writes
                scalars = {name: s for name, value in row.items() if (s := as_float(value)) is not None}
                for tracker in self.trackers:
                    # a writer thread's error (TensorBoard's) surfaces here: WriteFailed names the tracker
                    with tracker_errors(tracker.name, tracker.location):
                        tracker.log_metrics(step, scalars)

    def close(self) -> None:
        """Flush and close metrics.jsonl (not the trackers); safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with failing_as(self.metrics_path):
                self._file.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
