"""Trainer worker kernel for replay algorithms: learns on batches served by the buffer worker.

    batch slot (slot, env_steps) -> algorithm.step(batch) -> |TD| into batch["priority"]
        -> release slot (the buffer reads the priorities) -> version += 1 -> publish

The batch is learned on in place (the tensors view the buffer's shared slot); nothing is copied
but what the algorithm itself reads.
"""

from __future__ import annotations

import time

import torch

from srl import devices
from srl.api.algorithm import Algorithm
from srl.api.policy import Policy
from srl.data import columns as C
from srl.monitor.timing import OTHER, SEND_RECV, TRAINING, TimeBreakdown
from srl.streams.batches import BatchClient
from srl.streams.params import ParamPublisher
from srl.streams.reports import TrainsReport
from srl.streams.transport import Receiver
from srl.workers.learner import HostLearner, LearnerSettings


class ReplayTrainerKernel(HostLearner[TrainsReport]):
    def __init__(
        self, policy: Policy, algorithm: Algorithm, batches: BatchClient, params: ParamPublisher, settings: LearnerSettings,
    ) -> None:
        super().__init__(policy, algorithm, settings)
        self.batches, self.params = batches, params
        self.tensors = [{n: torch.from_numpy(a) for n, a in slot.items()} for slot in batches.slots]
        self.device = devices.of(policy)  # where the batches go for an update
        # labels the update, batch hand-off and publishing; the shell adds the time spent waiting
        # for a batch (without it every update showed as "other")
        self.clock = TimeBreakdown()

    @property
    def receivers(self) -> list[Receiver]:
        return self.batches.receivers

    def start(self) -> None:
        self.params.publish(self.version, self.policy)

    def poll(self) -> bool:
        self.clock.switch(SEND_RECV)  # taking and releasing batch slots
        ready = self.batches.poll(limit=1)
        for slot, env_steps in ready:
            if self.max_updates is None or self.version < self.max_updates:
                self._update(slot, env_steps)
            self.batches.release(slot)
        self.params.publish_again_if_unheard(self.version, self.policy, heard=bool(ready))  # srl.streams.params
        self.clock.switch(OTHER)
        self._checkpoint_if_due()
        return bool(ready)

    def _update(self, slot: int, env_steps: int) -> None:
        started = time.perf_counter()
        self.trained_env_steps = max(self.trained_env_steps, env_steps)
        previous = self.clock.switch(TRAINING)
        batch = self.tensors[slot]
        moved = batch if self.device.type == "cpu" else {  # where the policy is (the slot's own tensors on the CPU)
            n: t.to(self.device, non_blocking=True) for n, t in batch.items()}
        stats = self.guard.step(moved, self.trained_env_steps)
        if moved is not batch and C.PRIORITY in batch:  # the algorithm wrote them into the copy
            batch[C.PRIORITY].copy_(moved[C.PRIORITY])  # the buffer reads them from the slot
        self.clock.switch(SEND_RECV)
        if stats is not None:  # else undone (non-finite): no new version; the buffer keeps its
            self.stats = stats  # priorities where the batch's are not finite (srl.data.replay)
            self.version += 1
            self.params.publish(self.version, self.policy)
            self.updates += 1
        self.clock.switch(previous)
        self.train_time_s += time.perf_counter() - started

    def report(self) -> TrainsReport:  # replay keeps every segment (the segment trainer has its own)
        return self._report(segments_dropped=0, policy_lag_mean=None)
