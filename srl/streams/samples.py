"""Sample stream: actors hand trajectory segments to the trainer by slot index.

Each (actor, split) owns `slots_per_split` segment slots in the actor's shared block. The actor
fills a free slot step by step, sends (actor, split, slot), and may not touch that slot again
until the trainer releases it; with no free slot the actor's split waits (back-pressure), so a
sample is never overwritten before it is consumed, and never delivered twice.

On a transport that shares no memory (tcp), a sample message carries the segment's arrays and
the trainer copies them into its own slot (srl.streams.carry); a release carries nothing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from srl.streams.carry import carry_in, carry_out, slot_at
from srl.streams.transport import Receiver, Transport

SAMPLES_NAME = "trainer.samples"
Segment = dict[str, np.ndarray]  # column -> [T + 1, rows, ...]: see srl.data.columns


def released_name(actor: int) -> str:
    return f"actor.{actor}.released"


@dataclass(frozen=True)
class SegmentRef:
    actor: int
    split: int
    slot: int


class SampleProducer:
    """Actor side."""

    def __init__(self, transport: Transport, actor: int, slots: dict[tuple[int, int], Segment]) -> None:
        self.actor = actor
        self.slots = slots  # (split, slot) -> segment arrays
        # header (actor, split, slot): the slot is slots[(split, slot)] here
        self._out = carry_out(transport, transport.sender(SAMPLES_NAME), slot_at(slots, 1, 2))
        self._released = transport.receiver(released_name(actor))
        self._free: dict[int, deque[int]] = {}
        for split, slot in slots:
            self._free.setdefault(split, deque()).append(slot)
        self.receivers: list[Receiver] = [self._released]

    def acquire(self, split: int) -> int | None:
        """A free slot of `split`, or None while the trainer holds them all."""
        for message in self._released.recv_all():
            self._free[message.header[0]].append(message.header[1])
        free = self._free[split]
        return free.popleft() if free else None

    def send(self, split: int, slot: int) -> None:
        self._out.send((self.actor, split, slot))


class SampleConsumer:
    """Trainer side."""

    def __init__(self, transport: Transport, slots: dict[tuple[int, int, int], Segment]) -> None:
        self.slots = slots  # (actor, split, slot) -> segment arrays
        self._in = carry_in(transport, transport.receiver(SAMPLES_NAME), slot_at(slots, 0, 1, 2))
        actors = sorted({a for a, _, _ in slots})
        self._release = {a: transport.sender(released_name(a)) for a in actors}
        self.receivers: list[Receiver] = [self._in]

    def poll(self, limit: int) -> list[SegmentRef]:
        return [SegmentRef(*m.header[:3]) for m in self._in.recv_all(limit)]

    def segment(self, ref: SegmentRef) -> Segment:
        return self.slots[(ref.actor, ref.split, ref.slot)]

    def release(self, ref: SegmentRef) -> None:
        self._release[ref.actor].send((ref.split, ref.slot))
