"""Writes each report of a run to `metrics.jsonl` and, optionally, to TensorBoard.

    rec = Recorder(run_dir, start_time_s=time.time())
    rec.write({"env_steps": 4096, "charts/episode_return_mean": 21.5, "losses/value_loss": 0.3})
    rec.close()

Every `write` appends one JSON object (one line) to `run_dir/metrics.jsonl`, with the metric
names as given plus `time_s` (seconds since `start_time_s`, rounded to the millisecond), and
flushes it, so a reader tailing the file sees each report at once. Every numeric metric also
goes to TensorBoard as a scalar at step `metrics["env_steps"]`, under `run_dir/tb`.
"""

from __future__ import annotations

import json
import math
import numbers
import pathlib
import threading
import time
from typing import Any

from srl.storage import WriteFailed, failing_as

METRICS_FILE = "metrics.jsonl"
TB_DIR = "tb"
TB_FLUSH_S = 2.0


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


def _scalar(value: Any) -> float | None:
    """The float TensorBoard gets for a metric, or None when the metric is not a number."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "item"):
        try:
            item = value.item()
        except (ValueError, RuntimeError):
            return None
        return _scalar(item)
    return None


def _quiet_tensorboard_thread() -> None:
    """TensorBoard writes event files in a thread that keeps its error for the next add_scalar
    (where Recorder.write reports it, naming the path) and then re-raises it: without this the
    thread would print the same fault again as a raw traceback. Other threads' errors still print."""
    global _QUIETED
    if _QUIETED:
        return
    _QUIETED = True
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError):
            return
        previous(args)

    threading.excepthook = hook


_QUIETED = False


class Recorder:
    """Appends reports to `run_dir/metrics.jsonl` and mirrors numeric ones to TensorBoard."""

    def __init__(self, run_dir: pathlib.Path, start_time_s: float, tensorboard: bool = True) -> None:
        self.run_dir = pathlib.Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.start_time_s = float(start_time_s)
        self.metrics_path = self.run_dir / METRICS_FILE
        with failing_as(self.metrics_path):
            self._file = open(self.metrics_path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._writes = 0
        self._closed = False
        self._tb = None
        self._last_tb_flush = time.monotonic()
        if tensorboard:
            # Imported here: it costs about a second, and a run without TensorBoard never pays it.
            from torch.utils.tensorboard import SummaryWriter

            _quiet_tensorboard_thread()
            with failing_as(self.run_dir / TB_DIR):
                self._tb = SummaryWriter(log_dir=str(self.run_dir / TB_DIR), flush_secs=int(TB_FLUSH_S))

    @property
    def tb_dir(self) -> pathlib.Path | None:
        """Where the TensorBoard event files go, or None when TensorBoard is off."""
        return self.run_dir / TB_DIR if self._tb is not None else None

    def write(self, metrics: dict[str, float | int | None]) -> None:
        """Record one report. `env_steps` is the TensorBoard step (the report count when absent)."""
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
            if self._tb is not None:
                with failing_as(self.run_dir / TB_DIR):  # TensorBoard's writer thread's error surfaces here
                    self._write_tb(metrics, row)

    def _write_tb(self, metrics: dict[str, Any], row: dict[str, Any]) -> None:
        assert self._tb is not None
        step_value = _scalar(metrics.get("env_steps"))
        step = int(step_value) if step_value is not None else self._writes
        for name, value in row.items():
            scalar = _scalar(value)
            if scalar is not None:
                self._tb.add_scalar(name, scalar, global_step=step)
        now = time.monotonic()
        if now - self._last_tb_flush >= TB_FLUSH_S:
            self._tb.flush()
            self._last_tb_flush = now

    def flush(self) -> None:
        with self._lock:
            if self._closed:
                return
            with failing_as(self.metrics_path):
                self._file.flush()
            if self._tb is not None:
                with failing_as(self.run_dir / TB_DIR):
                    self._tb.flush()
                self._last_tb_flush = time.monotonic()

    def close(self) -> None:
        """Flush and close both outputs, both even when one fails (then WriteFailed for the first);
        safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            closes = [(self.metrics_path, self._file.close)]
            if self._tb is not None:
                closes.append((self.run_dir / TB_DIR, self._tb.close))
            failures = []
            for path, close in closes:
                try:
                    with failing_as(path):
                        close()
                except WriteFailed as e:
                    failures.append(e)
            if failures:
                raise failures[0]

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
