"""Buffer worker kernel: actors' segments in, n-step transitions stored, replay batches out.

    actor segments --(sample stream)--> n-step transitions --> replay memory (ring, sum tree)
    replay memory --sample--> batch slot --(batch stream)--> trainer --|TD|, release--> priorities

Each segment is copied into the memory and its slot released at once. Batches are served once
`warmup` transitions are stored. With `replay_ratio` set, the ratio of transitions sampled to
transitions stored after warmup is held at replay_ratio both ways: batches are served only while
the trainer is behind it, and new segments are taken only while the trainer is not (the actors'
segment slots fill up and they wait: back-pressure). So the updates per env step, and with them
the learning curve per env step, do not depend on which side is faster on a given machine.

With a run directory, the memory (and the count of transitions sampled, which the replay ratio
reads) is saved every `checkpoint_interval_s` and at exit (srl.checkpoint.save_replay), and
loaded again on resume or restart. Segments received but not stored are not saved: they live in
the actors' slots, which a new run's actors own again.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Hashable
from pathlib import Path

import numpy as np

from srl import checkpoint
from srl.data import columns as C
from srl.data.replay import ReplayMemory, segment_transitions
from srl.data.replay_state import memory_state, restore_memory
from srl.monitor.timing import OTHER, REPLAY, SEND_RECV, TimeBreakdown
from srl.streams.batches import BatchServer
from srl.streams.reports import BufferReport, Key
from srl.streams.samples import SampleConsumer, SegmentRef
from srl.streams.transport import Receiver
from srl.workers.kernel import KernelDefaults


class BufferKernel(KernelDefaults):
    def __init__(
        self,
        samples: SampleConsumer,
        batches: BatchServer,
        memory: ReplayMemory,
        gamma: float,
        n_step: int,
        warmup: int,
        replay_ratio: float | None,
        num_agents: int,
        items: Callable[[dict[str, np.ndarray], Hashable], dict[str, np.ndarray]] | None = None,
        steps_per_item: int = 1,
        run_dir: Path | None = None,
        checkpoint_interval_s: float = 60.0,
        resume: bool = False,
    ) -> None:
        self.samples, self.batches, self.memory = samples, batches, memory
        # what a segment is stored as: n-step transitions, (recurrent) whole sequences, or (hindsight
        # relabelling) the episodes it ends; called with the segment's lane, (actor, split, epoch)
        self.items = items or (lambda segment, lane: segment_transitions(segment, gamma, n_step))
        self.steps_per_item = steps_per_item  # env steps (rows) one stored item stands for
        self.gamma, self.n_step = gamma, n_step
        self.warmup, self.replay_ratio = warmup, replay_ratio
        self.num_agents = num_agents
        self.sampled = 0  # transitions served in batches, for the replay ratio
        self.pending: deque[SegmentRef] = deque()  # received, not yet stored
        self.run_dir, self.checkpoint_interval_s = run_dir, checkpoint_interval_s
        self._last_checkpoint_s = time.monotonic()
        self.clock = TimeBreakdown()  # replay memory work vs. stream hand-off; the shell adds waiting
        self._reset_stats()
        saved = checkpoint.load_replay(run_dir) if resume and run_dir is not None else None
        if saved is not None:
            restore_memory(self.memory, saved)
            self.sampled = int(saved["buffer.sampled"])
        elif resume and run_dir is not None:  # a restart before the first save, or a replay.npz gone
            print(f"srl: buffer starts with an empty replay memory: no {checkpoint.checkpoint_dir(run_dir) / checkpoint.REPLAY}",
                  file=sys.stderr, flush=True)

    def _reset_stats(self) -> None:
        self.segments, self.batches_sent, self.priority_updates, self.busy_s = 0, 0, 0, 0.0

    @property
    def receivers(self) -> list[Receiver]:
        return self.samples.receivers + self.batches.receivers

    def poll(self) -> bool:
        started = time.perf_counter()
        self.clock.switch(SEND_RECV)  # stream hand-off; replay memory work switches to REPLAY inside
        did = self._store() | self._take_priorities()
        while self._may_serve():
            slot = self.batches.acquire()
            if slot is None:
                break
            batch = self.batches.slots[slot]
            self.clock.switch(REPLAY)
            self.memory.sample(batch)
            self.clock.switch(SEND_RECV)
            self.sampled += len(batch[C.INDEX])
            self.batches.send(slot, self.memory.inserted * self.steps_per_item // self.num_agents)
            self.batches_sent += 1
            did = True
        self.clock.switch(OTHER)
        if did:
            self.busy_s += time.perf_counter() - started
        if self.run_dir is not None and time.monotonic() - self._last_checkpoint_s > self.checkpoint_interval_s:
            self.save_checkpoint()
        return did

    def state(self) -> dict[str, np.ndarray]:
        return {**memory_state(self.memory), "buffer.sampled": np.int64(self.sampled)}

    def save_checkpoint(self) -> None:
        assert self.run_dir is not None
        checkpoint.save_replay(self.run_dir, self.state())
        self._last_checkpoint_s = time.monotonic()

    def _deficit(self) -> float:
        """Transitions the trainer still has to sample to be at the replay ratio (< 0: ahead)."""
        assert self.replay_ratio is not None
        return self.replay_ratio * (self.memory.inserted - self.warmup) - self.sampled

    def _store(self) -> bool:
        # received at once (a waiting message would wake the idle shell again and again), stored
        # and released only while the trainer keeps up with the replay ratio
        self.pending.extend(self.samples.poll(limit=1 << 16))
        stored = 0
        while self.pending:
            if self.replay_ratio is not None and self.memory.inserted >= self.warmup and self._deficit() > 0:
                break  # the trainer is behind: the actors' segments wait (back-pressure)
            ref = self.pending.popleft()
            self.clock.switch(REPLAY)  # n-step transitions (or sequences) into the memory
            self.memory.add(self.items(self.samples.segment(ref), (ref.actor, ref.split, ref.epoch)))
            self.clock.switch(SEND_RECV)
            self.samples.release(ref)
            stored += 1
        self.segments += stored
        return stored > 0

    def _take_priorities(self) -> bool:
        slots = self.batches.released()
        for slot in slots:
            batch = self.batches.slots[slot]
            self.clock.switch(REPLAY)
            self.priority_updates += self.memory.update_priorities(batch[C.INDEX], batch[C.STAMP], batch[C.PRIORITY])
            self.clock.switch(SEND_RECV)
        return bool(slots)

    def _may_serve(self) -> bool:
        if self.memory.inserted < self.warmup:
            return False
        return self.replay_ratio is None or self._deficit() > 0

    def report(self) -> BufferReport:
        out: BufferReport = {
            Key.REPLAY_SIZE: self.memory.size,
            Key.REPLAY_INSERTED: self.memory.inserted,
            Key.SEGMENTS_STORED: self.segments,
            Key.BATCHES_SERVED: self.batches_sent,
            Key.PRIORITY_UPDATES: self.priority_updates,
            Key.BUFFER_TIME_S: round(self.busy_s, 4),
            Key.SEGMENTS_LOST: self.samples.from_dead_actors,  # sent by an actor that died first
        }
        self.samples.from_dead_actors = 0
        self._reset_stats()
        return out

    def finish(self) -> BufferReport:
        if self.run_dir is not None:
            self.save_checkpoint()
        return self.report()
