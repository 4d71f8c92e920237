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
from typing import Any

from srl.config import ExperimentConfig
from srl.launch.launches import LaunchStart, RunCounts
from srl.launch.observers import ObservedReport, Observer
from srl.monitor.episodes import WINDOW, ReturnWindow
from srl.monitor.info import InfoWindows
from srl.monitor.timing import REPORT_KEY, BreakdownTable
from srl.streams.control import DROPPED_KEY, REJECTED_KEY, Role
from srl.workers.stop import Stop, StopKind, StopRules

PER_WORKER_TIMES = ("env_time_s", "infer_time_s", "train_time_s", "buffer_time_s")


class RunMonitor:
    def __init__(self, config: ExperimentConfig, start_env_steps: int = 0, launched_s: float | None = None,
                 policies: dict[str, str] | None = None, policy_names: tuple[str, ...] = ()) -> None:
        self.config = config
        self.started_s = time.monotonic()
        self.launched_s = time.time() if launched_s is None else launched_s  # the command's start
        self.env_steps = start_env_steps
        self.start_env_steps = start_env_steps  # a resumed run's earlier steps: not this launch's rate
        self.episodes = ReturnWindow(WINDOW)
        self.trainer: dict[str, Any] = {}
        self.updates = 0
        self.segments_dropped = 0
        self.final: dict[str, Any] = {}
        self.busy_s: dict[str, float] = {}  # worker -> seconds in env / inference / training
        self.time_breakdown = BreakdownTable()  # worker -> seconds per category (srl.monitor.timing)
        self._last_steps, self._last_s = start_env_steps, self.started_s
        self.last_report_s: dict[str, float] = {}
        self.target_reached_s: float | None = None
        self.restarts: dict[str, int] = {}  # worker -> times it was restarted
        self.segments_lost = 0
        self.env_steps_lost = 0.0
        self.updates_lost = 0
        self._last: dict[str, tuple[float, float, dict[str, Any]]] = {}  # worker -> (time, interval, report)
        self._resuming: dict[str, int] = {}  # restarted trainer (or pod) -> last version its old life reported
        self.eval_returns: list[float] = []  # the last finished evaluation round
        self.eval_version: int | None = None
        self.eval_policies: dict[str, dict[str, Any]] = {}  # several policies: each one's in that round
        self.rules = StopRules.of(config.stop)
        self.trainer_stop: Stop | None = None  # deterministic mode: the trainer's (or pod's) stop
        self.nonfinite_episodes_skipped = 0  # episodes actors dropped for a NaN / inf (srl.workers.nonfinite)
        self.nonfinite_updates_skipped = 0  # updates undone for one
        self.rejected: dict[str, int] = {}  # stream -> messages dropped by its receivers (srl.streams.tcp)
        self.dropped: dict[str, int] = {}  # stream -> messages dropped at a queue's bound (srl.streams.queues)
        # an ensemble: each member's own training episodes (the target is one member's, not the mix's)
        self.member_episodes: dict[str, ReturnWindow] | None = {} if config.pod.ensemble.population > 1 else None
        self.observers: list[Observer] = []  # a population manager, a league's keeper (srl.launch.observers)
        # several policies (srl.graph.lanes): worker -> its policy; each policy's episodes, trainer and updates
        self.policies = policies or {}
        self.policy_episodes = {p: ReturnWindow(WINDOW) for p in policy_names}
        self.trained = {p for w, p in self.policies.items() if w.startswith("trainer:")}  # not those that only act
        self.policy_trainers: dict[str, dict[str, Any]] = {p: {} for p in self.policy_episodes}
        self.policy_updates = dict.fromkeys(self.policy_episodes, 0)
        self.policy_final: dict[str, dict[str, Any]] = {}
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

    def on_report(self, role: Role, index: int, payload: dict[str, Any], final: bool = False) -> None:
        worker = f"{role.title}:{index}"
        now = time.monotonic()
        previous = self._last.get(worker)
        self._last[worker] = (now, now - previous[0] if previous else 0.0, payload)
        self.last_report_s[worker] = now
        self.segments_lost += payload.get("segments_lost", 0)
        self.on_rejected(payload.get(REJECTED_KEY) or {})
        self.on_dropped(payload.get(DROPPED_KEY) or {})
        for key in PER_WORKER_TIMES:
            if key in payload:
                self.busy_s[worker] = self.busy_s.get(worker, 0.0) + payload[key]
        if REPORT_KEY in payload:
            self.time_breakdown.add(worker, payload[REPORT_KEY])
        if role in (Role.ACTOR, Role.POD):
            played = (payload["episode_returns"], payload["episode_lengths"], payload.get("episodes"))
            self.env_steps += payload["env_steps"]
            if payload["env_steps"] and self.first_steps_s is None:
                self.first_steps_s = now
            self.episodes.add(*played)
            if role == Role.POD and self.member_episodes is not None:
                self.member_episodes.setdefault(worker, ReturnWindow(WINDOW)).add(*played)
            self.nonfinite_episodes_skipped += payload.get("nonfinite_episodes_skipped", 0)
            self.info.add(payload.get("episode_info", {}))
            for policy, episodes in payload.get("policies", {}).items():
                if policy in self.policy_episodes:
                    self.policy_episodes[policy].add(episodes["episode_returns"], episodes["episode_lengths"],
                                                     episodes["episodes"])
        if role == Role.EVAL and payload["eval_episode_returns"]:
            self.eval_returns = payload["eval_episode_returns"]
            self.eval_version = payload["eval_policy_version"]
            self.eval_policies = payload.get("eval_policies", {})
        if role in (Role.TRAINER, Role.POD):
            self.segments_dropped += payload["segments_dropped"]
        if self._leads(worker):
            self.updates += payload["updates"]
            self.nonfinite_updates_skipped += payload.get("nonfinite_updates_skipped", 0)
            self._count_resumed(worker, payload)
            policy = self.policies.get(worker)
            if policy is not None:
                self.policy_updates[policy] += payload["updates"]
                if final:
                    self.policy_final[policy] = payload
                if payload["updates"] or not self.policy_trainers[policy]:
                    self.policy_trainers[policy] = payload
            if (payload["updates"] or not self.trainer) and (policy is None or index == 0):  # the first policy's
                self.trainer = payload
            if final:
                self.final = payload
            self.trainer_stop = Stop.from_report(payload) or self.trainer_stop
        observed = ObservedReport(role, index, payload, self.policies.get(worker), self._leads(worker),
                                  self.env_steps, final)
        for observer in self.observers:
            observer.on_report(observed)

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
        losses = {k: v for k, v in self.trainer.items() if "/" in k and not self.policies}
        run = self.run_counts()
        return {
            "env_steps": run.env_steps,  # the run's, all launches: never goes back
            "env_steps_per_s": round(rate, 1),
            "episode_return_mean": self.episodes.mean_return,
            "episode_length_mean": self.episodes.mean_length,
            "episodes": run.episodes,
            "policy_version": self.trainer.get("policy_version", 0),
            "policy_lag_mean": self.trainer.get("policy_lag_mean"),
            "updates": run.updates,
            "env_steps_redone": self.env_steps_redone,
            "updates_redone": self.updates_redone,
            "trained_env_steps": self.trainer.get("trained_env_steps", 0),  # consumed by the (first) trainer
            "segments_dropped": self.segments_dropped,
            "segments_lost": self.segments_lost,
            "env_steps_lost": round(self.env_steps_lost),
            "updates_lost": self.updates_lost,
            "restarts": sum(self.restarts.values()),
            "nonfinite_episodes_skipped": self.nonfinite_episodes_skipped,
            "nonfinite_updates_skipped": self.nonfinite_updates_skipped,
            "rejected_messages": sum(self.rejected.values()),
            "dropped_messages": sum(self.dropped.values()),
            **losses,
            **self.info.means(),
            **self._eval_metrics(),
            **self._policy_metrics(),
        }

    def policy_summary(self) -> dict[str, dict[str, Any]]:
        """For summary.json: each policy's episodes, updates and final parameters."""
        return {policy: {"episode_return_mean": window.mean_return, "episodes": window.count,
                         "updates": self.policy_updates[policy],
                         "policy_version": self.policy_final.get(policy, {}).get("policy_version"),
                         "params_sha256": self.policy_final.get(policy, {}).get("params_sha256")}
                for policy, window in self.policy_episodes.items()}

    def _policy_metrics(self) -> dict[str, Any]:
        """Each policy's own, under its name: <policy>/episode_return_mean, <policy>/losses/...; a
        league's table goes to league.json as often (its learner's Elo in the metrics)."""
        out: dict[str, Any] = {}
        for observer in self.observers:
            out.update(observer.on_metrics())
        for policy, window in self.policy_episodes.items():
            trainer = self.policy_trainers[policy]
            out.update({
                f"{policy}/episode_return_mean": window.mean_return, f"{policy}/episode_length_mean": window.mean_length,
                f"{policy}/episodes": window.count, f"{policy}/policy_version": trainer.get("policy_version", 0),
                f"{policy}/updates": self.policy_updates[policy],
                **{f"{policy}/{k}": v for k, v in trainer.items() if "/" in k},
            })  # fmt: skip
        return out

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
        for policy in self.policy_episodes:
            mine = self.eval_policies.get(policy, {})
            out[f"{policy}/eval/episode_return_mean"] = _mean(mine.get("episode_returns", []))
            out[f"{policy}/eval/policy_version"] = mine.get("policy_version")
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
        if self.trained:  # each policy that trains makes max_updates of its own
            return min(max(self.policy_updates[p], self.policy_trainers[p].get("policy_version", 0)) for p in self.trained)
        return max(self.updates, self.trainer.get("policy_version", 0))

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
            trainer = self.policy_trainers[self.policies[worker]] if worker in self.policies else self.trainer
            counted = last[2].get("policy_version") if last is not None else trainer.get("policy_version")
            if counted is not None or self.config.run.resume is None:
                self._resuming[worker] = counted or 0
        if last is None:  # it never reported: it had taken nothing, and its steps are unknown
            return
        report_s, interval_s, report = last
        self.segments_lost += report.get("segments_pending", 0)
        if report.get("env_steps") and interval_s > 0:
            unreported_s = min((ended_s if ended_s is not None else now) - report_s, interval_s)
            self.env_steps_lost += report["env_steps"] * max(unreported_s, 0.0) / interval_s

    def _leads(self, worker: str) -> bool:
        """Whether `worker` counts updates: a pod; of several trainers taking each update together,
        trainer 0, which speaks for the group (with several policies, each policy's one trainer)."""
        return (worker.startswith("pod:") or worker == "trainer:0"
                or (worker.startswith("trainer:") and worker in self.policies))

    def _count_resumed(self, worker: str, payload: dict[str, Any]) -> None:
        """A restarted trainer's first report: the version it resumed from is its version less
        the updates it made since. Updates past that, counted from its old life's reports, are
        lost; updates up to it that its old life made but never reported (killed first) were kept."""
        counted = self._resuming.pop(worker, None)
        if counted is None or payload.get("policy_version") is None:
            return
        resumed_from = payload["policy_version"] - payload["updates"]
        lost = max(0, counted - resumed_from)
        self.updates_lost += lost
        self.updates += resumed_from - counted  # less the lost (counted, not kept), plus the unreported kept
        if worker in self.policies:
            self.policy_updates[self.policies[worker]] += resumed_from - counted

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
            version = payload.get("policy_version", payload.get("params_version"))
            if "lock_step_segments_sent" in payload:
                out.append(f"{worker} sent {payload['lock_step_segments_sent']} segments")
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
