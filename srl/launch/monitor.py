"""The controller's kernel: aggregates worker reports, decides when the run stops.

Both launchers feed it the same reports (in-process for inline, over the control stream for
local), so stopping rules and metrics are identical whatever the placement. The stop rules are
srl.workers.stop's `StopRules` (the lock-step trainer and the pod driver ask the same), and what
fired is a typed `Stop`. Parts of the controller that need more of the run (an ensemble's
population manager, a league's keeper) are observers in `observers` (srl.launch.observers): each
report, metrics row and the finish are passed on to them, and their commands taken from them.

What restarts cost is counted here too (metrics and summary):
- `segments_dropped`: segments a trainer dropped, acted too many versions ago (max_policy_lag) or
  overwritten by their restarted actor while it copied them;
- `segments_lost`: segments no update used because a worker died: sent to a trainer that died
  holding them (its actors count them when they take their slots back), taken by a dead trainer
  for an update it never made (as many as its last report said it held), or sent by an actor
  that died before they were taken;
- `env_steps_lost`: env steps a killed actor (or pod) took after its last report, estimated at the
  rate of that report for the time since, at most one report interval; not in `env_steps`;
- `updates_lost`: updates a restarted trainer (or pod) made again because its checkpoint was
  older than its last report; `updates` counts each update once, as the parameters did.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from srl.config import ExperimentConfig
from srl.launch.lane_stats import LaneStats
from srl.launch.launches import LaunchStart, RunCounts
from srl.launch.observers import ObservedReport, Observer
from srl.monitor.episodes import WINDOW, ReturnWindow
from srl.monitor.info import InfoWindows
from srl.monitor.timing import BreakdownTable
from srl.streams.control import Role
from srl.streams.reports import BUSY_TIMES, ActorReport, EvalReport, Key, PlaysReport, ShellReport, TrainsReport
from srl.workers.stop import Stop, StopKind, StopRules


class RunMonitor:
    def __init__(self, config: ExperimentConfig, start_env_steps: int = 0, launched_s: float | None = None,
                 lanes: Sequence[LaneStats] = ()) -> None:
        self.config = config
        self.started_s = time.monotonic()
        self.launched_s = time.time() if launched_s is None else launched_s  # the command's start
        self.env_steps = start_env_steps
        self.start_env_steps = start_env_steps  # a resumed run's earlier steps: not this launch's rate
        self.episodes = ReturnWindow(WINDOW)
        self.updates = 0
        self.segments_dropped = 0
        self.final: TrainsReport | None = None  # the run's trainer's (or first pod's) final report
        self.busy_s: dict[str, float] = {}  # worker -> seconds in env / inference / training
        self.time_breakdown = BreakdownTable()  # worker -> seconds per category (srl.monitor.timing)
        self._last_steps, self._last_s = start_env_steps, self.started_s
        self.last_report_s: dict[str, float] = {}
        self.target_reached_s: float | None = None
        self.restarts: dict[str, int] = {}  # worker -> times it was restarted
        self.segments_lost = 0
        self.env_steps_lost = 0.0
        self.updates_lost = 0
        self._last: dict[str, tuple[float, float, Mapping[str, Any]]] = {}  # worker -> (time, interval, report)
        self._resuming: dict[str, int] = {}  # restarted trainer (or pod) -> last version its old life reported
        self.eval_returns: list[float] = []  # the last finished evaluation round
        self.eval_version: int | None = None
        self.rules = StopRules.of(config.stop)
        self.trainer_stop: Stop | None = None  # deterministic mode: the trainer's (or pod's) stop
        self.nonfinite_episodes_skipped = 0  # episodes actors dropped for a NaN / inf (srl.workers.nonfinite)
        self.nonfinite_updates_skipped = 0  # updates undone for one
        self.rejected: dict[str, int] = {}  # stream -> messages dropped by its receivers (srl.streams.tcp)
        self.dropped: dict[str, int] = {}  # stream -> messages dropped at a queue's bound (srl.streams.queues)
        # an ensemble: each member's own training episodes (the target is one member's, not the mix's)
        self.member_episodes: dict[str, ReturnWindow] | None = {} if config.pod.ensemble.population > 1 else None
        self.observers: list[Observer] = []  # a population manager, a league's keeper (srl.launch.observers)
        # each policy's statistics, a lane of the run (srl.launch.lane_stats): its episodes, trainer and updates
        self.lanes = list(lanes) or [LaneStats.one_policy(config)]
        self._lane_of = {worker: lane for lane in self.lanes for worker in lane.workers}
        self._leaders = {worker: lane for lane in self.lanes for worker in lane.leaders}
        self.info = InfoWindows()  # monitor.info_keys: each key's window of episode-end values (srl.monitor.info)
        self._moved: tuple[int, int] = (self.env_steps, self.updates)  # (env steps, updates) when last moved
        self._moved_s = self.started_s
        self.run_start = RunCounts()  # the run's counts when this launch began (srl.launch.launches)
        self.env_steps_redone = 0  # env steps taken again after resumes: self.env_steps does not hold them
        self.updates_redone = 0
        self.first_steps_s: float | None = None  # when this launch's first env steps were reported

    def continue_run(self, start: LaunchStart) -> None:
        """A launch of a run: its counters go on from the run's (`start`), never back."""
        self.run_start = start.start
        self.env_steps_redone, self.updates_redone = start.env_steps_redone, start.updates_redone

    def run_counts(self) -> RunCounts:
        """The run's counters now, all launches: env steps taken (the re-done ones included: the
        policy's own, `env_steps`, plus `env_steps_redone`), updates, episodes, seconds run."""
        return RunCounts(self.env_steps + self.env_steps_redone, self.run_start.updates + self.updates,
                         self.run_start.episodes + self.episodes.count, self.run_start.time_s + self.launch_s())

    def launch_s(self) -> float:
        """Seconds since this launch's workers were launched."""
        return time.monotonic() - self.started_s

    def time_limit_elapsed_s(self) -> float | None:
        """The seconds stop.time_limit_s is held against, as stop.time_limit_counts says: the run's
        (all launches), this launch's, or this launch's since its first env steps (None before)."""
        counts = self.config.stop.time_limit_counts
        if counts == "run":
            return self.run_start.time_s + self.launch_s()
        if counts == "launch":
            return self.launch_s()
        return None if self.first_steps_s is None else time.monotonic() - self.first_steps_s

    def on_report(self, role: Role, index: int, payload: Mapping[str, Any], final: bool = False) -> None:
        """A worker's report. Read through its role's type (srl.streams.reports): the controller's
        check passed it (srl.launch.reports: each key its role declares holds a value of the
        declared type, the required ones present), an inline run's come from the kernels, which
        return that type; so the casts below only name what was checked."""
        worker = f"{role.title}:{index}"
        now = time.monotonic()
        previous = self._last.get(worker)
        self._last[worker] = (now, now - previous[0] if previous else 0.0, payload)
        self.last_report_s[worker] = now
        self.segments_lost += payload.get(Key.SEGMENTS_LOST, 0)  # an actor's, trainer's or buffer's
        for key in BUSY_TIMES:  # one per role that labels its busy time
            if key in payload:
                self.busy_s[worker] = self.busy_s.get(worker, 0.0) + payload[key]
        self._on_shell(worker, cast(ShellReport, payload))
        if role in (Role.ACTOR, Role.POD):
            self._on_played(worker, role, cast(PlaysReport, payload), now)
        if role == Role.ACTOR:
            self._on_lanes_played(cast(ActorReport, payload))
        if role == Role.EVAL:
            self._on_eval(cast(EvalReport, payload))
        if role in (Role.TRAINER, Role.POD):
            self._on_trained(worker, cast(TrainsReport, payload), final)
        lane = self._lane_of.get(worker)
        observed = ObservedReport(role, index, payload, None if lane is None else lane.name, self._leads(worker),
                                  self.env_steps, final)
        for observer in self.observers:
            observer.on_report(observed)

    def _on_shell(self, worker: str, report: ShellReport) -> None:
        """What every worker's shell adds (srl.launch.shell)."""
        self.on_rejected(report.get(Key.REJECTED) or {})
        self.on_dropped(report.get(Key.DROPPED) or {})
        if Key.TIME_BREAKDOWN in report:
            self.time_breakdown.add(worker, report[Key.TIME_BREAKDOWN])

    def _on_played(self, worker: str, role: Role, report: PlaysReport, now: float) -> None:
        """An actor's or pod's env steps and episodes."""
        played = (report[Key.EPISODE_RETURNS], report[Key.EPISODE_LENGTHS], report.get(Key.EPISODES))
        self.env_steps += report[Key.ENV_STEPS]
        if report[Key.ENV_STEPS] and self.first_steps_s is None:
            self.first_steps_s = now
        self.episodes.add(*played)
        if role == Role.POD and self.member_episodes is not None:
            self.member_episodes.setdefault(worker, ReturnWindow(WINDOW)).add(*played)
        self.nonfinite_episodes_skipped += report.get(Key.NONFINITE_EPISODES_SKIPPED, 0)
        self.info.add(report.get(Key.EPISODE_INFO, {}))

    def _on_lanes_played(self, report: ActorReport) -> None:
        """Several policies: each one's episodes (srl.workers.lanes)."""
        policies = report.get(Key.POLICIES, {})
        for stats in self.lanes:
            if stats.name in policies:
                mine = policies[stats.name]
                stats.episodes.add(mine[Key.EPISODE_RETURNS], mine[Key.EPISODE_LENGTHS], mine[Key.EPISODES])

    def _on_eval(self, report: EvalReport) -> None:
        """The evaluator's last round (none yet: empty returns)."""
        if report[Key.EVAL_EPISODE_RETURNS]:
            self.eval_returns = report[Key.EVAL_EPISODE_RETURNS]
            self.eval_version = report[Key.EVAL_POLICY_VERSION]
            policies = report.get(Key.EVAL_POLICIES, {})  # several: each one's part of the round
            for stats in self.lanes:
                stats.eval = policies.get(stats.name)

    def _on_trained(self, worker: str, report: TrainsReport, final: bool) -> None:
        """A trainer's or pod's updates; a leader's (srl.launch.lane_stats) are counted."""
        self.segments_dropped += report[Key.SEGMENTS_DROPPED]
        if self._leads(worker):
            self.updates += report[Key.UPDATES]
            self.nonfinite_updates_skipped += report.get(Key.NONFINITE_UPDATES_SKIPPED, 0)
            self._count_resumed(worker, report)
            self._leaders[worker].on_leader_report(report, final)
            if final:
                self.final = report
            self.trainer_stop = Stop.from_report(report) or self.trainer_stop

    def connect(self, transport: Any) -> None:
        """The controller's transport, for the observers with streams of their own (a league's
        keeper: srl.population.keeper)."""
        for observer in self.observers:
            connect = getattr(observer, "connect", None)
            if connect is not None:
                connect(transport)

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]:
        """The observers' commands to send now, as (pod index, command) (srl.launch.observers)."""
        return [command for observer in self.observers for command in observer.take_commands()]

    def finish(self) -> None:
        """The run ended: each observer writes what it keeps."""
        for observer in self.observers:
            observer.on_finish()

    def on_rejected(self, counts: dict[str, int]) -> None:
        """Messages dropped since the last count, per stream: a worker's (in its report) or the
        controller's own receivers'."""
        _add_counts(self.rejected, counts)

    def on_dropped(self, counts: dict[str, int]) -> None:
        """Messages dropped at a queue's bound since the last count, per stream (as on_rejected)."""
        _add_counts(self.dropped, counts)

    def metrics(self) -> dict[str, Any]:
        now = time.monotonic()
        rate = (self.env_steps - self._last_steps) / max(now - self._last_s, 1e-9)
        self._last_steps, self._last_s = self.env_steps, now
        run = self.run_counts()
        return {
            "env_steps": run.env_steps,  # the run's, all launches: never goes back
            "env_steps_per_s": round(rate, 1),
            "episode_return_mean": self.episodes.mean_return,
            "episode_length_mean": self.episodes.mean_length,
            "episodes": run.episodes,
            "policy_version": self.trainer.get(Key.POLICY_VERSION, 0),
            "policy_lag_mean": self.trainer.get(Key.POLICY_LAG_MEAN),
            "updates": run.updates,
            "env_steps_redone": self.env_steps_redone,
            "updates_redone": self.updates_redone,
            "trained_env_steps": self.trainer.get(Key.TRAINED_ENV_STEPS, 0),  # consumed by the (first) trainer
            "segments_dropped": self.segments_dropped,
            "segments_lost": self.segments_lost,
            "env_steps_lost": round(self.env_steps_lost),
            "updates_lost": self.updates_lost,
            "restarts": sum(self.restarts.values()),
            "nonfinite_episodes_skipped": self.nonfinite_episodes_skipped,
            "nonfinite_updates_skipped": self.nonfinite_updates_skipped,
            "rejected_messages": sum(self.rejected.values()),
            "dropped_messages": sum(self.dropped.values()),
            **self._lane_metrics(),
            **self.info.means(),
            **self._eval_metrics(),
            **self._observer_metrics(),
        }

    @property
    def trainer(self) -> Mapping[str, Any]:
        """The run's trainer: the last report of the first policy's leader that made updates (or its
        first; none yet: empty)."""
        return next((lane.trainer or {} for lane in self.lanes if lane.trains), {})

    def policy_summary(self) -> dict[str, dict[str, Any]]:
        """For summary.json's `policies`: each of several policies' episodes, updates and final
        parameters (none for a run's one policy: the run's own are its)."""
        return {lane.name: lane.summary() for lane in self.lanes if lane.named}

    def _lane_metrics(self) -> dict[str, Any]:
        """Each policy's own (srl.launch.lane_stats): the run's one policy's losses; each of several
        policies' counts and losses under its name (<policy>/episode_return_mean, <policy>/losses/...)."""
        return {k: v for lane in self.lanes for k, v in lane.metrics().items()}

    def _observer_metrics(self) -> dict[str, Any]:
        """The observers' columns (a league's table goes to league.json as often, its learner's Elo here)."""
        return {k: v for observer in self.observers for k, v in observer.on_metrics().items()}

    def run_rate(self) -> float | None:
        """Env steps per second over the whole launch: the env steps reported since this monitor was
        made (a resumed run's earlier ones left out) over the seconds since. The monitor is made just
        before the launcher starts any worker, and RunOutputs.finish asks after every worker's final
        report: so the interval is from the workers' launch to their end, their startup included
        (`metrics()`'s rate is over the time since the previous report, a fraction of a second at exit)."""
        seconds = time.monotonic() - self.started_s
        return round((self.env_steps - self.start_env_steps) / seconds, 1) if seconds > 0 else None

    def _eval_metrics(self) -> dict[str, Any]:
        if not self.config.eval.episodes:
            return {}
        out = {"eval/episode_return_mean": _mean(self.eval_returns), "eval/policy_version": self.eval_version}
        for lane in self.lanes:
            out.update(lane.eval_metrics())
        return out

    def stop(self) -> Stop | None:
        """Whether the run is over, and by which rule (srl.workers.stop); in deterministic mode
        as the trainer (or pod) decided at an update boundary from the data it trained on."""
        if self.config.run.deterministic:
            stop = self.trainer_stop
        else:
            stop = self.rules.decide(self._updates_made(), self.env_steps, self.time_limit_elapsed_s(), self._target())
        if stop is not None and stop.kind is StopKind.TARGET:
            self._target_reached()
        return stop

    def _target(self) -> Stop | None:
        """The target held against the mean return of the last 100 episodes: the run's, or in an
        ensemble the first member's that reaches it; with stop.target_on=eval, the evaluator's last round's."""
        if self.config.stop.target_on == "eval":
            return self.rules.eval_target(self.eval_returns)
        windows = {"": self.episodes} if self.member_episodes is None else self.member_episodes
        reached = (self.rules.target(window.mean_return, window.count, by=worker) for worker, window in windows.items())
        return next((stop for stop in reached if stop is not None), None)

    def _updates_made(self) -> int:
        """What max_updates is held against: one trainer (group) or pod stops on its parameters'
        version, which counts a resumed run's earlier updates and ones its restarted life never
        reported; an ensemble's members each count their own, so it stops on their sum."""
        if self.member_episodes is not None:
            return self.updates
        # each policy that trains makes max_updates of its own
        return min((lane.updates_made() for lane in self.lanes if lane.trains), default=0)

    def _target_reached(self) -> None:
        if self.target_reached_s is None:
            self.target_reached_s = time.time() - self.launched_s

    def on_restart(self, worker: str, ended_s: float | None = None) -> None:
        """A restarted worker gets a full heartbeat timeout to start and report. What its old life
        took with it is counted: see the module doc (`ended_s`: when its end was seen)."""
        now = time.monotonic()
        self.restarts[worker] = self.restarts.get(worker, 0) + 1
        self.last_report_s[worker] = now
        last = self._last.pop(worker, None)
        if self._leads(worker):  # the version its parameters were counted up to
            trainer: Mapping[str, Any] = self._leaders[worker].trainer or {}
            counted = last[2].get(Key.POLICY_VERSION) if last is not None else trainer.get(Key.POLICY_VERSION)
            if counted is not None or self.config.run.resume is None:
                self._resuming[worker] = counted or 0
        if last is None:  # it never reported: it had taken nothing, and its steps are unknown
            return
        report_s, interval_s, report = last
        self.segments_lost += report.get(Key.SEGMENTS_PENDING, 0)
        if report.get(Key.ENV_STEPS) and interval_s > 0:
            unreported_s = min((ended_s if ended_s is not None else now) - report_s, interval_s)
            self.env_steps_lost += report[Key.ENV_STEPS] * max(unreported_s, 0.0) / interval_s

    def _leads(self, worker: str) -> bool:
        """Whether `worker` counts updates: a pod; of several trainers taking each update together,
        the first, which speaks for the group (with several policies, each policy's first trainer)."""
        return worker in self._leaders

    def _count_resumed(self, worker: str, payload: TrainsReport) -> None:
        """A restarted trainer's first report: the version it resumed from is its version less
        the updates it made since. Updates past that, counted from its old life's reports, are
        lost; updates up to it that its old life made but never reported (killed first) were kept."""
        counted = self._resuming.pop(worker, None)
        if counted is None or payload.get(Key.POLICY_VERSION) is None:
            return
        resumed_from = payload[Key.POLICY_VERSION] - payload[Key.UPDATES]
        lost = max(0, counted - resumed_from)
        self.updates_lost += lost
        self.updates += resumed_from - counted  # less the lost (counted, not kept), plus the unreported kept
        self._leaders[worker].updates += resumed_from - counted

    def on_unplaced(self, worker: str) -> None:
        """Its launcher has not placed it yet (Ray waits for resources): its heartbeat clock starts once placed."""
        self.last_report_s[worker] = time.monotonic()

    def still_s(self) -> float:
        """Seconds since the env steps or the updates last moved (since the start if never)."""
        now, moved = time.monotonic(), (self.env_steps, self.updates)
        if moved != self._moved:
            self._moved, self._moved_s = moved, now
        return now - self._moved_s

    def lock_step_positions(self) -> list[str]:
        """Where each worker last said it was, for a stalled run's message: an actor's segments sent
        (lock step), the parameter version a trainer, policy worker or the parameter service holds."""
        out = []
        for worker, (_, _, payload) in sorted(self._last.items()):
            version = payload.get(Key.POLICY_VERSION, payload.get(Key.PARAMS_VERSION))
            if Key.LOCK_STEP_SEGMENTS_SENT in payload:
                out.append(f"{worker} sent {payload[Key.LOCK_STEP_SEGMENTS_SENT]} segments")
            elif version is not None:
                out.append(f"{worker} holds version {version}")
        return out

    def silent_workers(self, workers: list[str]) -> list[str]:
        """Workers whose last report is older than the heartbeat timeout."""
        now = time.monotonic()
        limit = self.config.launch.heartbeat_timeout_s
        return [w for w in workers if now - self.last_report_s.get(w, self.started_s) > limit]


def _add_counts(totals: dict[str, int], counts: dict[str, int]) -> None:
    for stream, count in counts.items():
        if isinstance(stream, str) and isinstance(count, int) and count > 0:
            totals[stream] = totals.get(stream, 0) + count


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
