"""What both trainer kernels (srl.workers.trainer for segments, srl.workers.replay_trainer for
replay batches) keep: the policy and its algorithm, the parameter version and env steps reached,
the checkpoint they resume from and the one they save on a timer, and the report they send.

Updates go through an `UpdateGuard` (srl.workers.nonfinite): one that leaves a NaN or an infinity
is undone. Resuming takes the newest checkpoint of this run that loads (srl.checkpoint.load_latest);
where the run has checkpoints and none loads, the trainer stops the run rather than start over
beside them."""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from srl import checkpoint
from srl.api.algorithm import Algorithm
from srl.api.policy import Policy
from srl.faults import RunHalted
from srl.streams.reports import Key
from srl.workers.kernel import KernelDefaults
from srl.workers.nonfinite import UpdateGuard, load_state


class Learner(KernelDefaults):
    leader = True  # of a trainer group (srl.streams.gradients) only the leader writes checkpoints

    def __init__(
        self, policy: Policy, algorithm: Algorithm, run_dir: Path, checkpoint_interval_s: float, resume: bool,
        run_id: str | None = None, max_nonfinite_updates: int = 10,
    ) -> None:
        self.policy, self.algorithm = policy, algorithm
        self.run_dir, self.checkpoint_interval_s = run_dir, checkpoint_interval_s
        self.run_id = run_id  # stamped on every checkpoint; only this run's are resumed from
        self.version = 0
        self.env_steps = 0  # env steps consumed by updates (drives schedules)
        self._reset_stats()
        self.guard = UpdateGuard(policy, algorithm, max_nonfinite_updates)
        self._last_checkpoint_s = time.monotonic()
        resumed = resume_latest(run_dir, run_id, policy, algorithm, "trainer") if resume else None
        if resumed is not None:
            self.version, self.env_steps = resumed["version"], resumed["env_steps"]
            print(f"srl: trainer resumed from checkpoint version {self.version}", file=sys.stderr, flush=True)

    def _reset_stats(self) -> None:
        self.updates, self.train_time_s = 0, 0.0
        self.stats: dict[str, float] = {}

    def _checkpoint_if_due(self) -> None:
        if time.monotonic() - self._last_checkpoint_s > self.checkpoint_interval_s:
            self.save_checkpoint()

    def save_checkpoint(self) -> None:
        if self.leader:  # a group's parameters are the leader's: one checkpoint
            checkpoint.save(self.run_dir, self.version, self.env_steps, self.policy, self.algorithm.state_dict(),
                            run_id=self.run_id)
        self._last_checkpoint_s = time.monotonic()

    def _report(self, segments_dropped: int, policy_lag_mean: float | None) -> dict[str, Any]:
        """The report's fields since the last one; its counters start over."""
        skipped, self.guard.skipped = self.guard.skipped, 0
        out = {
            Key.NONFINITE_UPDATES_SKIPPED: skipped,
            Key.POLICY_VERSION: self.version,
            Key.TRAINED_ENV_STEPS: self.env_steps,
            Key.UPDATES: self.updates,
            Key.SEGMENTS_DROPPED: segments_dropped,
            Key.POLICY_LAG_MEAN: policy_lag_mean,
            Key.TRAIN_TIME_S: round(self.train_time_s, 4),
            **self.stats,
        }
        self._reset_stats()
        return out

    def report(self) -> dict[str, Any]:  # replay keeps every segment (the segment trainer has its own)
        return self._report(segments_dropped=0, policy_lag_mean=None)

    def finish(self) -> dict[str, Any]:
        self.save_checkpoint()
        return {**self.report(), Key.PARAMS_SHA256: checkpoint.params_sha256(self.policy)}


def resume_latest(run_dir: Path, run_id: str | None, policy: Policy, algorithm: Algorithm, who: str
                  ) -> dict[str, Any] | None:
    """The newest usable checkpoint of run `run_id`, loaded (srl.checkpoint.load_latest); None when
    there is none (a restart before its first life saved one, or run.if_no_checkpoint=start_fresh:
    at launch the controller refuses a resume without one), said on a line; RunHalted naming `who`
    when there are some and none loads."""
    try:
        state = checkpoint.load_latest(run_dir, run_id, apply=partial(load_state, policy, algorithm))
    except checkpoint.CheckpointError as e:
        raise RunHalted(f"{who} cannot resume: {e}") from None
    if state is None:
        print(f"srl: {who} starts from scratch: {checkpoint.nothing_to_load(run_dir)}", file=sys.stderr, flush=True)
    return state
