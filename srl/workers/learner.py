"""What every learner keeps: the two trainer kernels (srl.workers.trainer for segments,
srl.workers.replay_trainer for replay batches) and the pod (srl.workers.pod). A `Learner` holds
the policy and its algorithm, the parameter version and the env steps trained on, the checkpoint
it resumes from and the ones it saves on a timer and at the end; `HostLearner` adds what the two
trainers share: updates that the host runs and checks, and the report of their counters.

Their settings are one `LearnerSettings`, made once from the config (`LearnerSettings.of`); the
kernels take it beside their streams, policy and algorithm, and hold no config.

A trainer's updates go through an `UpdateGuard` (srl.workers.nonfinite): one that leaves a NaN or
an infinity is undone (a pod's through a DeviceUpdateGuard, decided on the device). Resuming
takes the newest checkpoint of this run that loads (srl.checkpoint.load_latest); where the run
has checkpoints and none loads, the learner stops the run rather than start over beside them."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from srl import checkpoint
from srl.api.algorithm import Algorithm
from srl.api.policy import Policy
from srl.faults import RunHalted
from srl.streams.reports import Key, TrainsReport, with_stats
from srl.workers.kernel import KernelDefaults
from srl.workers.nonfinite import UpdateGuard, load_state

if TYPE_CHECKING:
    from srl.config import ExperimentConfig


@dataclass(frozen=True)
class LearnerSettings:
    """A learner's settings from the config (the defaults are the config's)."""

    run_dir: Path | None = None  # where checkpoints go; None: none are written or resumed from
    checkpoint_interval_s: float = 60.0
    resume: bool = False  # continue from the newest usable checkpoint of run `run_id` in run_dir
    run_id: str | None = None  # stamped on every checkpoint; only this run's are resumed from
    max_nonfinite_updates: int = 10  # updates in a row that may be undone; one more ends the run
    max_updates: int | None = None  # the trainers update no further (a pod stops by its stop rules)
    max_policy_lag: int = 2  # the segment trainer drops segments acted by older versions
    record_digests: bool = False  # the segment trainer writes each version's parameter digest

    @classmethod
    def of(cls, config: ExperimentConfig) -> LearnerSettings:
        return cls(
            run_dir=Path(str(config.run.run_dir)),
            checkpoint_interval_s=config.run.checkpoint_interval_s,
            resume=config.run.resume is not None,
            run_id=config.run.run_id,
            max_nonfinite_updates=config.launch.max_nonfinite_updates,
            max_updates=config.stop.max_updates,
            max_policy_lag=config.dataflow.max_policy_lag,
            # (tests check that every trainer of a group took the same steps)
            record_digests=config.debug.record_param_digests,
        )


ReportT = TypeVar("ReportT", bound=TrainsReport)  # a learner's report: a trainer's or a pod's (srl.streams.reports)


class Learner(KernelDefaults, Generic[ReportT]):
    """Version, env steps trained on, checkpoints and resume; a subclass updates and reports."""

    leader = True  # of a trainer group (srl.streams.gradients) only the leader writes checkpoints
    who = "trainer"  # in its lines about resuming

    def __init__(self, policy: Policy, algorithm: Algorithm, settings: LearnerSettings) -> None:
        self.policy, self.algorithm, self.settings = policy, algorithm, settings
        self.run_dir = settings.run_dir
        self.version = 0
        self.trained_env_steps = 0  # env steps consumed by updates (drives schedules), across resumes
        self._last_checkpoint_s = time.monotonic()
        if settings.resume and self.run_dir is not None:
            self._resume(self.run_dir)

    def _resume(self, run_dir: Path) -> None:
        """From the newest usable checkpoint of run `run_id` (srl.checkpoint.load_latest); from
        scratch when there is none (a restart before its first life saved one, or
        run.if_no_checkpoint=start_fresh: at launch the controller refuses a resume without one),
        said on a line; RunHalted when there are some and none loads."""
        try:
            apply = partial(load_state, self.policy, self.algorithm)
            resumed = checkpoint.load_latest(run_dir, self.settings.run_id, apply=apply)
        except checkpoint.CheckpointError as e:
            raise RunHalted(f"{self.who} cannot resume: {e}") from None
        if resumed is None:
            print(f"srl: {self.who} starts from scratch: {checkpoint.nothing_to_load(run_dir)}", file=sys.stderr, flush=True)
        else:
            self.version, self.trained_env_steps = resumed["version"], resumed["env_steps"]
            print(f"srl: {self.who} resumed from checkpoint version {self.version}", file=sys.stderr, flush=True)

    def _checkpoint_if_due(self) -> None:
        if self.run_dir is not None and time.monotonic() - self._last_checkpoint_s > self.settings.checkpoint_interval_s:
            self.save_checkpoint()

    def save_checkpoint(self) -> None:
        if self.run_dir is not None and self.leader:  # a group's parameters are the leader's: one checkpoint
            checkpoint.save(self.run_dir, self.version, self.trained_env_steps, self.policy,
                            self.algorithm.state_dict(), run_id=self.settings.run_id)
        self._last_checkpoint_s = time.monotonic()

    def report(self) -> ReportT:
        raise NotImplementedError

    def finish(self) -> ReportT:
        self.save_checkpoint()
        out = self.report()
        out[Key.PARAMS_SHA256] = checkpoint.params_sha256(self.policy)
        return out


class HostLearner(Learner[ReportT]):
    """A trainer: updates run from the host through an UpdateGuard, counted for its reports."""

    def __init__(self, policy: Policy, algorithm: Algorithm, settings: LearnerSettings) -> None:
        super().__init__(policy, algorithm, settings)
        self.max_updates = settings.max_updates
        self._reset_stats()
        self.guard = UpdateGuard(policy, algorithm, settings.max_nonfinite_updates)

    def _reset_stats(self) -> None:
        self.updates, self.train_time_s = 0, 0.0
        self.stats: dict[str, float] = {}

    def _report(self, segments_dropped: int, policy_lag_mean: float | None) -> TrainsReport:
        """The report's fields since the last one, the last update's stats with them; its counters start over."""
        skipped, self.guard.skipped = self.guard.skipped, 0
        out: TrainsReport = {
            Key.NONFINITE_UPDATES_SKIPPED: skipped,
            Key.POLICY_VERSION: self.version,
            Key.TRAINED_ENV_STEPS: self.trained_env_steps,
            Key.UPDATES: self.updates,
            Key.SEGMENTS_DROPPED: segments_dropped,
            Key.POLICY_LAG_MEAN: policy_lag_mean,
            Key.TRAIN_TIME_S: round(self.train_time_s, 4),
        }
        out = with_stats(out, self.stats)
        self._reset_stats()
        return out
