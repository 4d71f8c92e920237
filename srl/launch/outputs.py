"""What a run leaves behind and shows: run directory, metrics, live display, summary."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srl.config import ExperimentConfig
from srl.config.checks import devices_used
from srl.faults import json_safe
from srl.launch.launches import LaunchStart, RunCounts, launch_list
from srl.launch.monitor import RunMonitor
from srl.monitor.timing import FILE_NAME as TIME_BREAKDOWN_FILE
from srl.storage import WriteFailed, failing_as, write_text_atomic
from srl.streams.rejections import LOG_EVERY_S
from srl.streams.reports import Key


class WorkerFailed(RuntimeError):
    """A worker raised, died or went silent; carries its traceback."""

    def __init__(self, worker: str, detail: str) -> None:
        super().__init__(f"worker {worker} failed:\n{detail.rstrip()}")


class RunStalled(WorkerFailed):
    """A lock-step run in which nothing moved for launch.stall_timeout_s, every worker alive."""

    def __init__(self, detail: str) -> None:
        RuntimeError.__init__(self, f"the run stalled: {detail.rstrip()}")


class RunOutputs:
    """Run directory with config.yaml, metrics.jsonl, TensorBoard events and summary.json.

    Every metrics row carries `launch` (1, then 2, ... for each run.resume=, which appends to the same
    metrics.jsonl), its counters (env_steps, updates, episodes, time_s) the run's, all launches
    (srl.launch.launches); the summary, `run_id`, `launch`, the run's totals and each launch's.
    Both are strict JSON: a NaN or an infinity is written as null."""

    def __init__(self, config: ExperimentConfig, started_s: float, launch: int = 1) -> None:
        self.config = config
        self.launch = launch  # this launch's number in the run (srl.launch.rundir)
        self.started_s = started_s  # wall-clock time the command started (time.time())
        self.run_dir = Path(str(config.run.run_dir))
        with failing_as(self.run_dir):  # WriteFailed: the run ends before it starts, with one line
            self.run_dir.mkdir(parents=True, exist_ok=True)
        config.dump_yaml(self.run_dir / "config.yaml")  # atomic: never an empty one to resume from
        self.recorder: Any = None
        self.display: Any = None
        self.plain: Any = None  # PlainProgress off a terminal (srl.monitor.progress)
        self.trackers: list[Any] = []  # srl.monitor.trackers, closed by close_trackers
        self._last_tick = 0.0
        self._progress_rows: dict[str, str] = {}
        self.end_faults: list[str] = []  # writes that failed while the run ended (finish)
        self._skips_shown = (0, 0.0)  # nonfinite_episodes_skipped last shown on the console, and when
        self.launches: list[LaunchStart] = []  # the run's launches so far, this one last (srl.launch.launches)

    def run_started_s(self) -> float:
        """The wall-clock time the run's `time_s` counts from: this command's start less the
        seconds of the run's earlier launches (the time between launches is not the run's)."""
        return self.started_s - (self.launches[-1].start.time_s if self.launches else 0.0)

    def start(self) -> None:
        """Open the writers. Called after workers are forked: these own threads (and W&B a process)."""
        from srl.monitor.display import LiveDisplay
        from srl.monitor.progress import Limits, PlainProgress, ProgressMeter
        from srl.monitor.recorder import Recorder
        from srl.monitor.trackers import open_trackers

        c = self.config
        self.trackers = open_trackers(c, self.run_dir)  # WriteFailed when one cannot start
        self.recorder = Recorder(self.run_dir, self.run_started_s(), self.trackers)
        enabled = c.monitor.display == "on" or (c.monitor.display == "auto" and sys.stdout.isatty())
        self.display = LiveDisplay(c.experiment, enabled)
        self.display.__enter__()
        # off a terminal (nohup, CI, a pipe) the table draws nothing: one plain line now and then instead
        if c.monitor.display == "plain" or (c.monitor.display != "off" and not self.display.enabled):
            self.plain = PlainProgress(sys.stdout, c.monitor.progress_interval_s)
        self.limits = Limits(c.stop.total_env_steps, c.stop.max_updates, c.stop.time_limit_s, c.stop.target_return,
                             c.stop.target_on)
        self.meter = ProgressMeter(self.limits)

    def tick(self, monitor: RunMonitor, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_tick >= self.config.monitor.log_interval_s:
            self._last_tick = now
            metrics = {**monitor.metrics(), "launch": self.launch}
            self.recorder.write(metrics)
            self._show(monitor, metrics)
            self._note_skips(monitor.nonfinite_episodes_skipped)

    def _note_skips(self, skipped: int) -> None:
        """Episodes skipped for NaN / inf (dataflow.nonfinite_env=skip_episode) on the console, whatever
        the display: a line once the first is counted, then one every LOG_EVERY_S while the count grows."""
        shown, shown_s = self._skips_shown
        now = time.monotonic()
        if skipped > shown and (not shown or now - shown_s >= LOG_EVERY_S):
            self._skips_shown = (skipped, now)
            print(f"srl: {skipped} episode(s) skipped so far for a NaN or an infinity from the env "
                  "(nonfinite_episodes_skipped; dataflow.nonfinite_env=skip_episode)", file=sys.stderr, flush=True)

    def _show(self, monitor: RunMonitor, metrics: dict[str, Any]) -> None:
        """The live table's rows, or a plain line, with the progress toward the stop rules."""
        from srl.monitor.progress import format_eta, format_fraction, progress_line

        if not self.display.enabled and self.plain is None:
            return
        elapsed_s = monitor.time_limit_elapsed_s() or 0.0  # the clock time_limit_s is on
        estimate = self.meter.observe(elapsed_s, monitor.env_steps, monitor.updates)
        self._progress_rows = {"progress": format_fraction(estimate), "eta": format_eta(estimate)[len("ETA "):]}
        self.display.update({**metrics, "time_s": time.time() - self.run_started_s(), **self._progress_rows})
        if self.plain is not None:
            line = progress_line(self.config.experiment, metrics, estimate, self.limits, elapsed_s)
            self.plain.maybe_write(elapsed_s, line)

    def finish(self, monitor: RunMonitor, reason: str, error: str | None) -> dict[str, Any]:
        """Write the last metrics row and summary.json; a write that fails (the disk that ended
        the run, say) is kept in `end_faults` and the rest are still tried."""
        run_rate = monitor.run_rate()  # after every worker's final report (see run_rate)
        if self.recorder is not None:
            # metrics.jsonl's last row: its rate is since the row before
            self._attempt(lambda: self.tick(monitor, force=True))
            # the table left on screen shows the rate over the whole run, not over the last tick
            self.display.update({**monitor.metrics(), **self._progress_rows, "env_steps_per_s": run_rate,
                                 "time_s": time.time() - self.run_started_s()})
            self.display.__exit__(None, None, None)
            self._attempt(self.recorder.close)
        run = monitor.run_counts()
        run.time_s = time.time() - self.run_started_s()
        summary = {
            "experiment": self.config.experiment,
            "run_id": self.config.run.run_id,
            "launch": self.launch,
            "stop_reason": reason,
            "error": error,
            # the run's totals, all launches (`launches`: each one's, adding up to these)
            "env_steps": run.env_steps,  # every env step taken: the policy's + env_steps_redone
            "env_steps_redone": monitor.env_steps_redone,  # taken again after a resume (srl.launch.launches)
            # this launch's env steps over the seconds from its workers' launch to their end
            # (RunMonitor.run_rate)
            "env_steps_per_s": run_rate,
            "started_unix_s": self.started_s,  # this launch's command's first line
            "wall_time_s": round(run.time_s, 3),  # the run's seconds: earlier launches' + this one's
            "time_to_target_s": monitor.target_reached_s,
            "devices": devices_used(self.config),
            "episode_return_mean": monitor.episodes.mean_return,
            "episodes": run.episodes,
            "info": monitor.info.means(),  # monitor.info_keys: info/<key> -> mean of the last 100 (srl.monitor.info)
            "updates": run.updates,
            "updates_redone": monitor.updates_redone,
            # what restarts and the policy lag cost (srl.launch.monitor)
            "updates_lost": monitor.updates_lost,
            "segments_dropped": monitor.segments_dropped,
            "segments_lost": monitor.segments_lost,
            "rejected_messages": sum(monitor.rejected.values()),
            "rejected_messages_by_stream": dict(sorted(monitor.rejected.items())),
            "dropped_messages": sum(monitor.dropped.values()),  # at a queue's bound (srl.streams.queues)
            "dropped_messages_by_stream": dict(sorted(monitor.dropped.items())),
            "env_steps_lost": round(monitor.env_steps_lost),
            "policy_version": None if monitor.final is None else monitor.final.get(Key.POLICY_VERSION),
            "params_sha256": None if monitor.final is None else monitor.final.get(Key.PARAMS_SHA256),
            "worker_busy_s": {k: round(v, 3) for k, v in sorted(monitor.busy_s.items())},
            "restarts": dict(sorted(monitor.restarts.items())),
            "nonfinite_episodes_skipped": monitor.nonfinite_episodes_skipped,
            "nonfinite_updates_skipped": monitor.nonfinite_updates_skipped,
            "time_breakdown": monitor.time_breakdown.as_dict(),
            "launches": self._launch_list(run, reason),
        }
        policies = monitor.policy_summary()
        if policies:  # several policies: each one's own (a run's one policy's are the run's)
            summary["policies"] = policies
        summary = json_safe(summary)
        breakdown = json.dumps(summary["time_breakdown"], indent=2, allow_nan=False) + "\n"
        self._attempt(lambda: write_text_atomic(self.run_dir / TIME_BREAKDOWN_FILE, breakdown))
        text = json.dumps(summary, indent=2, allow_nan=False) + "\n"
        self._attempt(lambda: write_text_atomic(self.run_dir / "summary.json", text))
        return summary

    def _launch_list(self, run: RunCounts, reason: str) -> list[dict[str, Any]]:
        """Each launch's own counts, what it resumed from and how it ended; they add up to `run`."""
        if not self.launches:  # a RunOutputs not made by srl.launch.run (a test's): this launch alone
            return launch_list([LaunchStart(self.launch, round(self.started_s, 3), RunCounts())], run, reason)
        return launch_list(self.launches, run, reason)

    def _attempt(self, write: Callable[[], Any]) -> None:
        try:
            write()
        except WriteFailed as e:
            if str(e) not in self.end_faults:
                self.end_faults.append(str(e))

    def close_trackers(self, code: int) -> list[str]:
        """Last of a run: the learning curve and summary.json go to every tracker, then each ends its
        run as the exit code says. Returns the faults not in `end_faults` yet (they are added there)."""
        from srl.monitor.plot import CURVE_FILE
        from srl.monitor.trackers import FAILED, FINISHED, KILLED, tracker_errors

        outcome = {0: FINISHED, 130: KILLED}.get(code, FAILED)
        before = list(self.end_faults)
        curve = [self.run_dir / CURVE_FILE] if self.config.monitor.learning_curve else []  # not an earlier launch's
        files = [p for p in (*curve, self.run_dir / "summary.json") if p.is_file()]
        for tracker in self.trackers:
            def close(tracker=tracker) -> None:
                with tracker_errors(tracker.name, tracker.location):
                    try:
                        for path in files:
                            tracker.log_artifact(path)
                    finally:  # a run that cannot take the files still ends
                        tracker.close(outcome)
            self._attempt(close)
        self.trackers = []
        return [fault for fault in self.end_faults if fault not in before]

    def write_learning_curve(self) -> str | None:
        """learning_curve.png in the run dir (after the summary: its time is not the run's).
        Returns a note for the console when it could not be drawn."""
        if not self.config.monitor.learning_curve:
            return None
        from srl.monitor.plot import PlotUnavailable, plot_learning_curve

        try:
            path = plot_learning_curve(self.run_dir, target=self.config.stop.target_return)
        except PlotUnavailable as e:
            return f"no {self.run_dir / 'learning_curve.png'}: {e}"
        except OSError as e:  # a full disk: the run's results are written already
            return f"no learning curve: {WriteFailed.of(self.run_dir / 'learning_curve.png', e)}"
        return None if path is not None else "no learning curve: no episode finished"
