"""A resumed run is one run: each launch's counters continue where the run's left off.

Before this, `run.resume=` started env_steps at the checkpoint's count (1,000,192 logged, then
764,416), updates, time_s and episodes at 0, and summary.json held the last launch alone: the
learning curve ran backwards. Now:

* a launch starts from the run's counts so far (`RunCounts`): the last row of metrics.jsonl (what
  the previous launch logged before it ended or was killed), or the checkpoint's env steps plus
  those re-done before, if that is more (a checkpoint written after the last row);
* the env steps between the checkpoint and the end of the previous launch are taken again: they
  are counted once more in `env_steps` (every env step the run took) and in `env_steps_redone`
  (the metric, cumulative), so env_steps = the policy's env steps (what stop.total_env_steps is
  held against) + env_steps_redone, and metrics.jsonl never goes back. Updates likewise
  (`updates_redone`: the last logged policy_version less the checkpoint's);
* `time_s` is the run's time: the time of earlier launches (to their last metrics row, or their
  summary) plus this one's; the time between launches is not counted;
* launches.json records each launch's start (its run counts then, and what it resumed from),
  written before its workers start: a launch killed with SIGKILL leaves no summary, but the next
  one knows where it began. summary.json's `launches` list gives each launch's own counts (the
  next launch's start less its own): they add up to the run's totals exactly.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from srl.monitor.recorder import METRICS_FILE
from srl.storage import write_text_atomic

LAUNCHES_FILE = "launches.json"
COUNTERS = ("env_steps", "updates", "episodes", "time_s")


@dataclasses.dataclass
class RunCounts:
    """The run's counters at a point: env steps taken (re-done ones included), updates, finished
    episodes, seconds run (launches added, the gaps between them not)."""

    env_steps: int = 0
    updates: int = 0
    episodes: int = 0
    time_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "time_s": round(self.time_s, 3)}

    @classmethod
    def of(cls, row: dict[str, Any]) -> RunCounts:
        return cls(int(row.get("env_steps") or 0), int(row.get("updates") or 0), int(row.get("episodes") or 0),
                   float(row.get("time_s") or 0.0))


@dataclasses.dataclass
class LaunchStart:
    """Where a launch began: the run's counts then; the checkpoint it resumed (env steps, version);
    the env steps and updates of the run it re-does (cumulative, all resumes so far)."""

    launch: int
    started_unix_s: float
    start: RunCounts
    resumed_env_steps: int = 0
    resumed_version: int | None = None
    env_steps_redone: int = 0
    updates_redone: int = 0
    stop_reason: str | None = None  # how it ended: its summary's, set by the next launch

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "start": self.start.as_dict()}

    @classmethod
    def of(cls, record: dict[str, Any]) -> LaunchStart:
        return cls(**{**record, "start": RunCounts.of(record.get("start") or {})})


def start_launch(run_dir: Path, launch: int, started_unix_s: float, resumed_env_steps: int,
                 resumed_version: int | None) -> list[LaunchStart]:
    """This launch's start, after the earlier launches' records (launches.json rewritten, a
    WriteFailed where it cannot be): the run's counts so far and what this resume re-does."""
    earlier = [r for r in _read_records(run_dir) if r.launch < launch]
    if launch > 1 and not earlier:  # a run of an srl before launches.json: its launches as one
        earlier = [LaunchStart(1, 0.0, RunCounts())]
    last_row = _last_row(run_dir)
    before = earlier[-1] if earlier else None
    summary = _summary_of(run_dir, launch - 1)
    if before is not None and before.stop_reason is None:
        before.stop_reason = summary.get("stop_reason") or "killed: it wrote no summary"
    logged = RunCounts.of(last_row)
    logged.time_s = max(logged.time_s, float(summary.get("wall_time_s") or 0.0))  # later than its last row
    # steps taken after the last row but before a newer checkpoint were taken all the same
    prior_redone = before.env_steps_redone if before is not None else 0
    logged.env_steps = max(logged.env_steps, resumed_env_steps + prior_redone) if launch > 1 else 0
    version = last_row.get("policy_version")
    redone_updates = max(0, int(version) - resumed_version) if version is not None and resumed_version is not None else 0
    mine = LaunchStart(launch, round(started_unix_s, 3), logged if launch > 1 else RunCounts(), resumed_env_steps,
                       resumed_version, env_steps_redone=logged.env_steps - resumed_env_steps if launch > 1 else 0,
                       updates_redone=(before.updates_redone if before is not None else 0) + redone_updates)
    records = [*earlier, mine]
    text = json.dumps([r.as_dict() for r in records], indent=2, allow_nan=False) + "\n"
    write_text_atomic(Path(run_dir) / LAUNCHES_FILE, text)
    return records


def launch_list(records: list[LaunchStart], end: RunCounts, last_reason: str) -> list[dict[str, Any]]:
    """summary.json's `launches`: each launch's own env steps, updates, episodes and seconds (the
    next one's start less its own; the last one's end less its start), what it resumed from and
    how it ended. They add up to `end`, the run's totals."""
    out = []
    for i, record in enumerate(records):
        stop = records[i + 1].start if i + 1 < len(records) else end
        ended = last_reason if i + 1 == len(records) else record.stop_reason
        counts = {k: getattr(stop, k) - getattr(record.start, k) for k in COUNTERS}
        out.append({"launch": record.launch, "started_unix_s": record.started_unix_s,
                    **{k: round(v, 3) if k == "time_s" else v for k, v in counts.items()},
                    "resumed_env_steps": record.resumed_env_steps, "resumed_version": record.resumed_version,
                    "env_steps_redone": record.env_steps_redone - (records[i - 1].env_steps_redone if i else 0),
                    "stop_reason": ended})
    return out


def _read_records(run_dir: Path) -> list[LaunchStart]:
    path = Path(run_dir) / LAUNCHES_FILE
    try:
        return [LaunchStart.of(r) for r in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError):  # none yet, or unreadable: only informative, rebuilt
        return []


def _last_row(run_dir: Path) -> dict[str, Any]:
    """metrics.jsonl's last complete row (a launch killed mid-write leaves a partial one)."""
    path = Path(run_dir) / METRICS_FILE
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "env_steps" in row:
            return row
    return {}


def _summary_of(run_dir: Path, launch: int) -> dict[str, Any]:
    """summary.json where `launch` wrote it (it ended, not killed); {} where not."""
    try:
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) and summary.get("launch") == launch else {}
