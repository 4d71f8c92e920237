"""Slot contents on transports that share no memory: the arrays of the slot a message names
travel with it, as raw frames after the header.

On shm and inline, a message naming a slot is enough: both ends see the same memory. On tcp,
each end has its own copy, so a stream wraps the sender and receiver of a hand-over with these
(`carry_out`, `carry_in`); each is told how to find the slot from the header and which of its
arrays move in that direction. On a transport that shares memory they return the endpoint as it
is, so the stream code is the same for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from srl.streams.transport import Message, Receiver, Sender, Transport
from srl.streams.wire import fill_slot, slot_frames

Slot = dict[str, np.ndarray]
SlotOf = Callable[[tuple[int, ...]], Slot]  # header -> the slot it names, on this side
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
        self.inner.send(header, slot_frames(slot, self.names(slot)))


class SlotReceiver(Receiver):
    """Copies each message's frames into the slot it names (checked against the slot's layout)."""

    def __init__(self, inner: Receiver, slot_of: SlotOf, names: Names) -> None:
        self.inner, self.slot_of, self.names = inner, slot_of, names

    def __getattr__(self, name: str) -> Any:  # the transport's `wait` reaches the socket
        return getattr(self.inner, name)

    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        messages = self.inner.recv_all(limit)
        for m in messages:
            slot = self.slot_of(m.header)
            fill_slot(slot, self.names(slot), m.frames)
        return messages


def carry_out(
    transport: Transport, sender: Sender, slot_of: SlotOf | None, names: Names = every_array
) -> Sender:
    if transport.shares_memory or slot_of is None:
        return sender
    return SlotSender(sender, slot_of, names)


def carry_in(
    transport: Transport, receiver: Receiver, slot_of: SlotOf | None, names: Names = every_array
) -> Receiver:
    if transport.shares_memory or slot_of is None:
        return receiver
    return SlotReceiver(receiver, slot_of, names)


def slot_at(slots: dict[Any, Slot] | list[Slot] | None, *positions: int) -> SlotOf | None:
    """header -> the slot keyed by the header's values at `positions` (None without slots)."""
    if slots is None:
        return None
    if len(positions) == 1:
        return lambda header: slots[header[positions[0]]]
    return lambda header: slots[tuple(header[p] for p in positions)]
