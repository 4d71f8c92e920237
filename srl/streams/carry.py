"""Slot contents on transports that share no memory: the arrays of the slot a message names
travel with it, as raw frames after the header.

On shm and inline, a message naming a slot is enough: both ends see the same memory. On tcp,
each end has its own copy, so a stream wraps the sender of a hand-over with `carry_out`, told
how to find the slot from the header and which of its arrays move in that direction; on a
transport that shares memory it returns the sender as it is, so the stream code is the same for
every backend. The receiving side declares the same in its schema (srl.streams.schema), which
checks the frames against the slot it owns before copying them in.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from srl.streams.transport import Sender, Transport
from srl.streams.wire import slot_frames

Slot = dict[str, np.ndarray]
SlotOf = Callable[[tuple[int, ...]], "Slot | None"]  # header -> the slot it names on this side (None: none)
Names = Callable[[Slot], Sequence[str]]  # slot -> the arrays that move, in order


def every_array(slot: Slot) -> list[str]:
    return list(slot)


class SlotSender(Sender):
    def __init__(self, inner: Sender, slot_of: SlotOf, names: Names) -> None:
        self.inner, self.slot_of, self.names = inner, slot_of, names

    def send(self, header: Sequence[int], frames: Sequence[Any] = ()) -> None:
        if frames:
            raise ValueError("a slot message carries its slot's arrays, nothing else")
        slot = self.slot_of(tuple(header))
        if slot is None:
            raise ValueError(f"header {tuple(header)} names no slot of this side")
        self.inner.send(header, slot_frames(slot, self.names(slot)))


def carry_out(
    transport: Transport, sender: Sender, slot_of: SlotOf | None, names: Names = every_array
) -> Sender:
    if transport.shares_memory or slot_of is None:
        return sender
    return SlotSender(sender, slot_of, names)


def slot_at(slots: dict[Any, Slot] | list[Slot] | None, *positions: int) -> SlotOf | None:
    """header -> the slot keyed by the header's values at `positions`, None where this side has
    no such slot (a list's negative positions included); None without slots."""
    if slots is None:
        return None
    if isinstance(slots, list):
        (at,) = positions
        return lambda header: slots[header[at]] if 0 <= header[at] < len(slots) else None
    key = operator.itemgetter(*positions)  # one value, or a tuple of several: in C, on the hot path
    return lambda header: slots.get(key(header))
