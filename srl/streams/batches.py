"""Batch stream: the buffer worker serves replay batches to the trainer by slot index.

The buffer's shared block holds `batch_slots` batch slots (srl.data.replay.batch_fields). The
buffer fills a free slot and sends (slot, env_steps); the trainer learns on it in place, writes
each row's |TD error| into its `priority` column, and releases (slot,). Only then does the
buffer read those priorities back into its sum tree and reuse the slot: a slot is written by
one side at a time, and priorities travel without a copy.

On a transport that shares no memory (tcp), each side keeps its own copy of the slots: a batch
message carries the slot's arrays but `priority` (srl.streams.carry), and a release carries only
`priority` back; the buffer's copy already holds the rows' index and stamp it needs with them.
Either side takes only messages naming one of its slots, whole (srl.streams.schema), and the
buffer only releases of slots it handed out: a slot is never free twice.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from srl.data import columns as C
from srl.streams.carry import carry_out, slot_at
from srl.streams.schema import COUNT, INDEX, Schema, checked
from srl.streams.transport import Receiver, Transport

BATCHES_NAME = "trainer.batches"
RELEASED_NAME = "buffer.released"
BUFFER_BLOCK = "buffer"
Batch = dict[str, np.ndarray]  # column -> [B, ...]: see srl.data.replay.batch_fields


def _served(batch: Batch) -> list[str]:
    """What a batch message carries to the trainer: every column but the one it writes back."""
    return [name for name in batch if name != C.PRIORITY]


def _written_back(batch: Batch) -> list[str]:
    return [C.PRIORITY]


def batch_schema(slots: list[Batch]) -> Schema:
    """(slot, env_steps) of one of the trainer's batch slots, carrying all but the priorities."""
    return Schema({"slot": INDEX, "env_steps": COUNT}, slot_at(slots, 0), _served)


def release_schema(slots: list[Batch]) -> Schema:
    """(slot,) of one of the buffer's batch slots, carrying the priorities."""
    return Schema({"slot": INDEX}, slot_at(slots, 0), _written_back)


class BatchServer:
    """Buffer side."""

    def __init__(self, transport: Transport, slots: list[Batch]) -> None:
        self.slots = slots
        # headers (slot, env_steps) and (slot,): the slot is slots[header[0]] on both sides
        self._out = carry_out(transport, transport.sender(BATCHES_NAME), slot_at(slots, 0), _served)
        released = transport.receiver(RELEASED_NAME)
        self._released = checked(transport, released, RELEASED_NAME, release_schema(slots))
        self._free = deque(range(len(slots)))
        self._out_slots: set[int] = set()  # sent, not yet released
        self.receivers: list[Receiver] = [self._released]

    def released(self) -> list[int]:
        """Slots the trainer handed back since the last call (now free again)."""
        slots = []
        for message in self._released.recv_all():
            slot = message.header[0]
            if slot in self._out_slots:  # else not ours to free (twice, or never sent)
                self._out_slots.discard(slot)
                slots.append(slot)
        self._free.extend(slots)
        return slots

    def acquire(self) -> int | None:
        return self._free.popleft() if self._free else None

    def send(self, slot: int, env_steps: int) -> None:
        self._out_slots.add(slot)
        self._out.send((slot, env_steps))


class BatchClient:
    """Trainer side."""

    def __init__(self, transport: Transport, slots: list[Batch]) -> None:
        self.slots = slots
        self._in = checked(transport, transport.receiver(BATCHES_NAME), BATCHES_NAME, batch_schema(slots))
        self._release = carry_out(transport, transport.sender(RELEASED_NAME), slot_at(slots, 0), _written_back)
        self.receivers: list[Receiver] = [self._in]

    def poll(self, limit: int = 1) -> list[tuple[int, int]]:
        """(slot, env_steps stored by then) of each batch waiting now."""
        return [(m.header[0], m.header[1]) for m in self._in.recv_all(limit)]

    def release(self, slot: int) -> None:
        self._release.send((slot,))
