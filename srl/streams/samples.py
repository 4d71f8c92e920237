"""Sample stream: actors hand trajectory segments to the trainer by slot index.

Each (actor, split) owns `slots_per_split` segment slots in the actor's shared block. The actor
fills a free slot step by step, sends (actor, split, slot), and may not touch that slot again
until the trainer releases it; with no free slot the actor's split waits (back-pressure), so a
sample is never overwritten before it is consumed, and never delivered twice.

Restarts (see srl.streams.incarnations): a sample is stamped with its actor's epoch and the
trainer epoch it was meant for, a release with both too; either side drops what another
incarnation sent, and an actor takes back its sent slots when the trainer is restarted.

With several trainers (num_trainers > 1), each actor sends to one of them (srl.graph.Graph.trainer_of)
on that trainer's own stream; the epochs checked are that trainer's.

On a transport that shares no memory (tcp), a sample message carries the segment's arrays and
the trainer copies them into its own slot (srl.streams.carry); a release carries nothing. Each
side takes only messages that name one of its slots (srl.streams.schema): others are dropped
and counted.

A tap (`tap_name`): where the config places workers that take "samples" (srl.api.worker), each
segment's consumer publishes a copy of it before releasing it; a `SampleTap` subscribes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from srl.streams.carry import carry_out, every_array, slot_at
from srl.streams.incarnations import NO_RESTARTS, Incarnations
from srl.streams.layout import ArraySpec
from srl.streams.reports import Key, SinkReport
from srl.streams.schema import EPOCH, INDEX, Schema, checked
from srl.streams.transport import Receiver, Transport

SAMPLES_NAME = "trainer.samples"  # the stream of trainer 0 (and of a replay buffer)
Segment = dict[str, np.ndarray]  # column -> [T + 1, rows, ...]: see srl.data.columns


def samples_name(trainer: int) -> str:
    return SAMPLES_NAME if trainer == 0 else f"trainer.{trainer}.samples"


def trainer_name(trainer: int) -> str:
    """The worker whose epoch the samples on `samples_name(trainer)` are meant for."""
    return f"trainer:{trainer}"


def released_name(actor: int) -> str:
    return f"actor.{actor}.released"


def tap_name(samples: str) -> str:
    """Where the consumer of stream `samples` publishes a copy of each segment it took."""
    return f"{samples}.tap"


def sample_schema(slots: dict[tuple[int, int, int], Segment]) -> Schema:
    """(actor, split, slot, epoch, trainer_epoch) of a slot of this trainer's actors."""
    actors = frozenset(a for a, _, _ in slots)
    fields = {"actor": actors, "split": INDEX, "slot": INDEX, "epoch": EPOCH, "trainer_epoch": EPOCH}
    return Schema(fields, slot_at(slots, 0, 1, 2), every_array)


def release_schema(slots: dict[tuple[int, int], Segment]) -> Schema:
    """(split, slot, epoch, trainer_epoch) of a slot of this actor; nothing carried."""
    fields = {"split": INDEX, "slot": INDEX, "epoch": EPOCH, "trainer_epoch": EPOCH}
    return Schema(fields, slot_at(slots, 0, 1))


@dataclass(frozen=True)
class SegmentRef:
    actor: int
    split: int
    slot: int
    epoch: int = 0  # the sending actor's epoch
    trainer_epoch: int = 0  # the epoch of the trainer it was sent to


class SampleProducer:
    """Actor side."""

    def __init__(
        self,
        transport: Transport,
        actor: int,
        slots: dict[tuple[int, int], Segment],
        incarnations: Incarnations = NO_RESTARTS,
        trainer: int = 0,
    ) -> None:
        self.actor = actor
        self.trainer = trainer_name(trainer)
        self.slots = slots  # (split, slot) -> segment arrays
        # header (actor, split, slot): the slot is slots[(split, slot)] here
        self._out = carry_out(transport, transport.sender(samples_name(trainer)), slot_at(slots, 1, 2))
        name = released_name(actor)
        self._released = checked(transport, transport.receiver(name), name, release_schema(slots))
        self._free: dict[int, deque[int]] = {}
        for split, slot in slots:
            self._free.setdefault(split, deque()).append(slot)
        self._sent: set[tuple[int, int]] = set()  # (split, slot) the trainer holds
        self.reclaimed = 0  # segments sent to a trainer that was restarted before it released them: lost
        self._incarnations = incarnations
        self.epoch = incarnations.of(f"actor:{actor}")
        self.trainer_epoch = incarnations.of(self.trainer)
        self.receivers: list[Receiver] = [self._released]

    def report(self) -> SinkReport:
        """For the actor's report: segments sent to a trainer that died holding them, since the last."""
        lost, self.reclaimed = self.reclaimed, 0
        return {Key.SEGMENTS_LOST: lost}

    def acquire(self, split: int) -> int | None:
        """A free slot of `split`, or None while the trainer holds them all."""
        self.collect_releases()
        free = self._free[split]
        return free.popleft() if free else None

    def collect_releases(self) -> None:
        """Take the trainer's releases off the socket into the free lists. An actor waits on this
        socket whatever it waits for: a release left unread would wake it at once, again and
        again (a busy spin that starves the trainer it waits for on a small machine).

        Releases first: one that a trainer sent before it died names a segment it took, so only
        the slots left are the ones it never took (`reclaimed`, lost with it). No release of a
        later trainer can be among them: nothing was sent to it before we saw its epoch."""
        for message in self._released.recv_all():
            s, k, epoch, trainer_epoch = message.header
            if (epoch, trainer_epoch) == (self.epoch, self.trainer_epoch) and (s, k) in self._sent:
                self._sent.discard((s, k))
                self._free[s].append(k)
        trainer_epoch = self._incarnations.of(self.trainer)
        if trainer_epoch != self.trainer_epoch:  # restarted: the slots it held are ours again
            self.reclaimed += len(self._sent)
            for s, k in self._sent:
                self._free[s].append(k)
            self._sent.clear()
            self.trainer_epoch = trainer_epoch

    def send(self, split: int, slot: int) -> None:
        self._sent.add((split, slot))
        self._out.send((self.actor, split, slot, self.epoch, self.trainer_epoch))


class SampleConsumer:
    """Trainer side."""

    def __init__(
        self,
        transport: Transport,
        slots: dict[tuple[int, int, int], Segment],
        incarnations: Incarnations = NO_RESTARTS,
        trainer: int = 0,
        tap: str | None = None,
    ) -> None:
        self.slots = slots  # (actor, split, slot) -> segment arrays of this trainer's actors
        name = samples_name(trainer)
        self._in = checked(transport, transport.receiver(name), name, sample_schema(slots))
        self._tap = None if tap is None else transport.publisher(tap)
        actors = sorted({a for a, _, _ in slots})
        self._release = {a: transport.sender(released_name(a)) for a in actors}
        self._incarnations = incarnations
        self.epoch = incarnations.of(trainer_name(trainer))
        self.stale = 0  # samples dropped because their actor or their trainer was restarted
        # ... of them, those whose actor was restarted (the others, meant for a restarted trainer, the
        # actor counts as reclaimed): lost segments
        self.from_dead_actors = 0
        self.receivers: list[Receiver] = [self._in]

    def poll(self, limit: int) -> list[SegmentRef]:
        refs = [SegmentRef(*m.header) for m in self._in.recv_all(limit)]
        for r in refs:  # a later epoch than ours: its actor restarted (tcp: our copy may lag)
            self._incarnations.observe(f"actor:{r.actor}", r.epoch)
        mine = [r for r in refs if r.trainer_epoch == self.epoch]
        fresh = [r for r in mine if self.current(r)]
        self.stale += len(refs) - len(fresh)
        self.from_dead_actors += len(mine) - len(fresh)
        return fresh

    def current(self, ref: SegmentRef) -> bool:
        """Its actor still lives in the epoch that sent it (checked again after a copy)."""
        return ref.epoch == self._incarnations.of(f"actor:{ref.actor}")

    def segment(self, ref: SegmentRef) -> Segment:
        return self.slots[(ref.actor, ref.split, ref.slot)]

    def release(self, ref: SegmentRef) -> None:
        if self._tap is not None:  # the copy goes first: the actor may write into the slot once released
            self._tap.send((ref.actor,), list(self.segment(ref).values()))
        self._release[ref.actor].send((ref.split, ref.slot, ref.epoch, self.epoch))


class SampleTap:
    """Copies of the segments their consumers took, from the taps named (srl.api.worker "samples")."""

    def __init__(self, transport: Transport, names: list[str], arrays: dict[str, ArraySpec]) -> None:
        schema = Schema({"actor": INDEX}, frame_bytes=[spec.nbytes for spec in arrays.values()])
        self.receivers: list[Receiver] = [checked(transport, transport.subscriber(n), n, schema) for n in names]
        self.arrays = arrays  # column -> its shape [T + 1, rows, ...] and dtype, in the frames' order

    def poll(self) -> list[Segment]:
        """Every copy waiting now, as column -> array (read-only)."""
        return [
            {name: np.frombuffer(frame, spec.dtype).reshape(spec.shape) for (name, spec), frame in
             zip(self.arrays.items(), message.frames)}
            for receiver in self.receivers for message in receiver.recv_all()
        ]  # fmt: skip
