"""Trainer worker kernel: gathers segments into a batch, updates, publishes a new version.

Segments acted by a policy more than `max_policy_lag` versions older than the trainer's are
dropped (and counted); the rest are copied into a preallocated batch and their slots released
at once, so actors refill them while the trainer computes.

With `splits_per_actor` set (deterministic mode), every update takes exactly one segment from each ring
group, at that group's fixed place in the batch, whatever order they arrive in: the batch, and
so the update, does not depend on process timing. Deterministic mode also gives it a `LockStepStop`
(srl.workers.stop): after each update it decides from the batch alone whether the run is over
(env steps trained on, the episodes that ended in its segments), and says so in its reports.

With several trainers (`group`, srl.streams.gradients), each gathers its own actors' segments and
the group averages gradients, so each update is one step on the union of their batches; only
the group's leader (rank 0) publishes parameters and writes checkpoints.
"""

from __future__ import annotations

import json
import time

import numpy as np

from srl import checkpoint, devices, transfer
from srl.api.algorithm import Algorithm
from srl.api.policy import FieldSpec, Policy
from srl.data import columns as C
from srl.monitor.episodes import EpisodeTally
from srl.monitor.timing import OTHER, SEND_RECV, TRAINING, TimeBreakdown
from srl.streams.gradients import GradientGroup
from srl.streams.params import ParamPublisher
from srl.streams.reports import Key, TrainerReport
from srl.streams.samples import SampleConsumer, SegmentRef
from srl.streams.transport import Receiver
from srl.workers.learner import HostLearner, LearnerSettings
from srl.workers.stop import LockStepStop


class TrainerKernel(HostLearner[TrainerReport]):
    def __init__(
        self,
        policy: Policy,
        algorithm: Algorithm,
        samples: SampleConsumer,
        params: ParamPublisher | None,
        fields: dict[str, FieldSpec],
        sample_length: int,
        batch_segments: int,
        rows_per_segment: int,
        num_agents: int,
        settings: LearnerSettings,
        splits_per_actor: int | None = None,
        group: GradientGroup | None = None,
        actors: list[int] | None = None,
        stop: LockStepStop | None = None,
    ) -> None:
        super().__init__(policy, algorithm, settings)
        self.samples, self.params = samples, params
        self.batch_segments, self.rows = batch_segments, rows_per_segment
        self.num_agents = num_agents
        steps, width = sample_length + 1, batch_segments * rows_per_segment
        # segments are copied into host memory that the update moves from at once: pinned where
        # the policy is on a GPU, so each column's copy to it is asynchronous (srl.transfer)
        self.device = devices.of(policy)
        self.tensors = {n: transfer.host_zeros((steps, width, *f.shape), f.dtype, self.device) for n, f in fields.items()}
        self.batch = {n: t.numpy() for n, t in self.tensors.items()}  # share memory
        self.filled = 0
        self.splits_per_actor = splits_per_actor  # set: segment (actor, split) has a fixed batch place
        # an actor's place among this trainer's actors (several trainers each take a share)
        self.actor_place = {a: i for i, a in enumerate(actors)} if actors is not None else None
        self.places_filled: set[int] = set()
        self.held: list[SegmentRef] = []  # segments for the next batch (deterministic mode)
        assert stop is None or splits_per_actor is not None, "a lock-step stop needs fixed batch places"
        self.stop = stop  # deterministic mode: the run's stop rules, decided here (srl.workers.stop)
        # episodes of the batch's columns: each column is always the same env (fixed places)
        self.tally = EpisodeTally(width, num_agents) if stop is not None else None
        self.clock = TimeBreakdown()
        self.group = group  # None: the only trainer; else only its leader publishes and checkpoints
        if group is not None:
            group.attach(policy)
        self.leader = group is None or group.leader
        assert (params is not None) == self.leader, "exactly the leader publishes parameters"
        # version -> sha256 of the parameters after that update, written to run_dir/param_digests at
        # the end (tests check that every trainer took the same steps)
        self.digests: dict[int, str] | None = {} if settings.record_digests else None

    def _reset_stats(self) -> None:
        super()._reset_stats()
        self.dropped, self.lag_sum, self.lag_count = 0, 0, 0

    @property
    def receivers(self) -> list[Receiver]:
        return self.samples.receivers

    def start(self) -> None:
        self._publish()

    def _publish(self) -> None:
        if self.params is not None:
            self.params.publish(self.version, self.policy)

    def poll(self) -> bool:
        limit = self.batch_segments if self.splits_per_actor else self.batch_segments - self.filled
        self.clock.switch(SEND_RECV)  # receiving: the poll, batch copies and releases
        refs, self.held = self.held + self.samples.poll(limit=limit), []
        usable = False  # a segment came that we keep (or hold): the actors act with weights we made
        for ref in refs:
            if self._done():
                self.samples.release(ref)  # done: the last update's parameters are final
                continue
            place = self._place(ref)
            if place is None:
                self.held.append(ref)
                usable = True
                continue
            taken = self._take(self.samples.segment(ref), place)
            if taken and not self.samples.current(ref):
                self._untake(place)  # its actor was restarted while we copied: maybe half new
            usable |= taken
            self.samples.release(ref)
            if self.filled == self.batch_segments:
                self._update()
        if self.params is not None and self.params.service_restarted():  # it lost the weights: resend
            self._publish()
        elif self.params is not None:  # sent again if no usable segment came since (srl.streams.params):
            # segments all dropped say the acting side missed our versions, and no new one comes
            self.params.publish_again_if_unheard(self.version, self.policy, heard=usable)
        self.clock.switch(OTHER)
        self._checkpoint_if_due()
        return bool(refs)

    def _done(self) -> bool:
        if self.stop is not None and self.stop.reason is not None:
            return True
        return self.max_updates is not None and self.version >= self.max_updates

    def _place(self, ref: SegmentRef) -> int | None:
        """Where in the batch this segment goes; None: its group's place is taken (hold it)."""
        if self.splits_per_actor is None:
            return self.filled
        actor = ref.actor if self.actor_place is None else self.actor_place[ref.actor]
        place = actor * self.splits_per_actor + ref.split
        return None if place in self.places_filled else place

    def _take(self, segment: dict[str, np.ndarray], place: int) -> bool:
        versions = segment[C.POLICY_VERSION][:-1]
        lag = self.version - versions
        # lag < 0: acted by a version this trainer never made (it was restarted from a checkpoint)
        if int(lag.max()) > self.settings.max_policy_lag or int(lag.min()) < 0:
            self.dropped += 1
            return False
        self.lag_sum += int(lag.sum())
        self.lag_count += lag.size
        cols = slice(place * self.rows, (place + 1) * self.rows)
        for name, array in self.batch.items():
            array[:, cols] = segment[name]
        self.filled += 1
        self.places_filled.add(place)
        return True

    def _untake(self, place: int) -> None:
        self.filled -= 1
        self.places_filled.discard(place)
        self.dropped += 1

    def _update(self) -> None:
        if self.group is not None and not self.group.proceed():  # a member is leaving: no update
            self.filled = 0
            self.places_filled.clear()
            return
        started = time.perf_counter()
        steps = (self.batch[C.REWARD].shape[0] - 1) * self.batch[C.REWARD].shape[1] // self.num_agents
        self.trained_env_steps += steps
        previous = self.clock.switch(TRAINING)
        stats = self.guard.step(self.tensors, self.trained_env_steps)
        # the next segments overwrite the batch: its copies to a GPU must be done (the guard's
        # finiteness check waited already, so this costs nothing; on the CPU it does nothing)
        transfer.wait(self.device)
        self.clock.switch(SEND_RECV)
        if stats is None:  # undone (non-finite): its batch not trained on
            self.trained_env_steps -= steps
        else:
            self.stats = stats
        # an undone update makes no new version, but in lock step it must: every actor waits for
        # the version after its last segment, and would wait for good (the same weights go out)
        if stats is not None or self.stop is not None:
            self.version += 1
            if self.digests is not None:
                self.digests[self.version] = checkpoint.params_sha256(self.policy)
            self._publish()
        self._decide_stop()  # its episodes still count: the tally follows every batch's columns
        self.clock.switch(previous)
        self.filled = 0
        self.places_filled.clear()
        self.updates += stats is not None
        self.train_time_s += time.perf_counter() - started

    def _decide_stop(self) -> None:
        """Deterministic mode: stop after this update? From this batch's steps and episodes only.
        A group's trainers pool their episodes (rank by rank) so that all of them decide alike."""
        if self.stop is None or self.tally is None:
            return
        steps = self.batch[C.REWARD].shape[0] - 1
        done = self.batch[C.TERMINATED][:steps] | self.batch[C.TRUNCATED][:steps]
        returns, _ = self.tally.steps(self.batch[C.REWARD][:steps], done)
        trainers = 1 if self.group is None else self.group.world_size
        if self.group is not None and self.stop.rules.target_return is not None:
            returns = self.group.gather(returns, capacity=done.size)
        # the group's trainers take equal shares of the actors: env steps trained on by all of them
        self.stop.after_update(self.version, self.trained_env_steps * trainers, returns)

    def report(self) -> TrainerReport:
        # lost: sent by an actor that died before we took them; pending: taken (copied and
        # released) for the next update, lost with us if we die (the controller counts the last)
        out: TrainerReport = {**self._report(self.dropped, self.lag_sum / self.lag_count if self.lag_count else None),
                              Key.SEGMENTS_LOST: self.samples.from_dead_actors, Key.SEGMENTS_PENDING: self.filled}
        self.samples.from_dead_actors = 0
        if self.stop is not None:
            out.update(self.stop.report())  # the stop and its kind (srl.workers.stop)
        return out

    def finish(self) -> TrainerReport:
        if self.group is not None:
            self.group.leave()
        if self.digests is not None and self.run_dir is not None:
            rank = 0 if self.group is None else self.group.rank
            path = self.run_dir / "param_digests" / f"trainer-{rank}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.digests, sort_keys=True))
        return super().finish()

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
