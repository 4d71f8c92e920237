"""What each stream's messages look like, checked where they are received, before any of it is used.

A stream declares one `Schema` for what its receiver takes: the header's fields (exactly these,
each within its allowed values: an actor, slot or policy index this side owns, a count neither
negative nor huge), the slot the header names on this side, and the frames (how many, and each
one's size in bytes: the slot's arrays as this process laid them out, the policy's tensors); a
stream with messages of several kinds declares one per kind (`Kinds`). `checked` wraps the
stream's receiver: a message that does not fit is dropped and counted with the transport's other
drops (`Transport.rejections`: `rejected_messages` in metrics and summary), never raised, so no
message can make a worker crash-loop. A message that fits can be used as it is: every index
names something that exists, and on a transport that shares no memory the slot it names already
holds the arrays it carried (srl.streams.carry), copied once, after the check.

Such a message must be signed with the run's key (srl.streams.tcp refuses others first): a bug,
or a peer of another version or config. Over shm and inline only the run's own processes reach a
stream, but the same check runs there: a few integer comparisons per message, no copy.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from srl.streams.carry import Names, Slot, SlotOf
from srl.streams.transport import Message, Receiver, Transport
from srl.streams.wire import fill_slot

COUNT = range(1 << 63)  # a non-negative int64: versions, env steps, request keys
EPOCH = range(1 << 31)  # a worker's epoch: one per restart
INDEX = range(1 << 31)  # a split or slot index (the slot lookup then asks whether this side has it)
Fill = tuple[Slot, Sequence[str]]  # a slot, and its arrays a message's frames are copied into


class Malformed(ValueError):
    """A message its stream's schema does not allow; `str()` says what is wrong."""


def one_of(*values: int) -> frozenset[int]:
    return frozenset(int(v) for v in values)


def json_object(frame: bytes | memoryview, what: str) -> dict[str, Any]:
    """A frame that must hold a JSON object (a command, a league table); Malformed naming `what` if not."""
    try:
        value = json.loads(bytes(frame))
    except (ValueError, RecursionError) as error:
        raise Malformed(f"{what} that is not JSON: {type(error).__name__}") from None
    if type(value) is not dict:
        raise Malformed(f"{what} that is not a JSON object")
    return value


class Schema:
    """One kind of message: `fields` (name -> allowed values, in header order); `slot_of` (header
    -> the slot it names on this side, None if none); `carried` (the slot's arrays the message
    carries where memory is not shared; elsewhere it carries none); `frame_bytes` (without a slot:
    each frame's size, None for any size); `more_frames` (how many frames of any size may follow
    those: a report's or command's attachments, srl.streams.control); `content` (checks of what
    frames hold, raising Malformed)."""

    def __init__(
        self,
        fields: Mapping[str, Container[int]],
        slot_of: SlotOf | None = None,
        carried: Names | None = None,
        frame_bytes: Sequence[int | None] = (),
        content: Callable[[Message], None] | None = None,
        more_frames: int = 0,
    ) -> None:
        self.names, self.allowed, self._length = tuple(fields), tuple(fields.values()), len(fields)
        self.slot_of, self.carried = slot_of, carried
        self.frame_bytes, self.content, self.more_frames = tuple(frame_bytes), content, more_frames

    def check(self, message: Message, carries: bool) -> Fill | None:
        """Where `message`'s frames go (a slot and its arrays' names; None: nowhere), or
        Malformed. `carries`: slot arrays travel with messages (a transport that shares no memory)."""
        header = message.header
        if len(header) != self._length or not all(map(operator.contains, self.allowed, header)):
            raise Malformed(self._unfit(header))
        fill, sizes = None, self.frame_bytes
        if self.slot_of is not None:
            slot = self.slot_of(header)
            if slot is None:
                raise Malformed(f"header {header} names no slot of this side")
            if carries and self.carried is not None:
                fill = (slot, self.carried(slot))
                sizes = tuple(slot[name].nbytes for name in fill[1])
        frames = message.frames
        if frames or sizes:  # most messages inside a machine carry no frame: nothing to compare
            if self.more_frames and len(sizes) < len(frames) <= len(sizes) + self.more_frames:
                frames = frames[: len(sizes)]  # the attachments: any size (the transport bounds it)
            self._check_frames(frames, sizes)
        if self.content is not None:
            self.content(message)
        return fill

    @staticmethod
    def _check_frames(frames: Sequence[Any], sizes: Sequence[int | None]) -> None:
        if len(frames) != len(sizes):
            raise Malformed(f"{len(frames)} frames; expected {len(sizes)}")
        for i, (frame, size) in enumerate(zip(frames, sizes)):
            if size is not None and len(frame) != size:
                raise Malformed(f"frame {i} of {len(frame)} bytes; expected {size}")

    def _unfit(self, header: tuple[int, ...]) -> str:
        if len(header) != self._length:
            return f"a header of {len(header)} fields; expected {len(self.names)} ({', '.join(self.names)})"
        bad = [f"{n}={v}" for n, v, a in zip(self.names, header, self.allowed) if v not in a]
        return f"header {header}: {', '.join(bad)} out of bounds"


class Kinds:
    """A stream whose messages are of several kinds, told apart by the header's first field."""

    def __init__(self, kinds: Mapping[int, Schema]) -> None:
        self.kinds = dict(kinds)

    def check(self, message: Message, carries: bool) -> Fill | None:
        schema = self.kinds.get(message.header[0]) if message.header else None
        if schema is None:
            head = message.header[0] if message.header else None
            raise Malformed(f"a message of kind {head}; this stream takes kinds {sorted(self.kinds)}")
        return schema.check(message, carries)


class CheckedReceiver(Receiver):
    """A stream's receiver that returns only messages its schema allows (see the module doc)."""

    def __init__(self, transport: Transport, inner: Receiver, name: str, schema: Schema | Kinds) -> None:
        self.inner, self.name, self.schema = inner, name, schema
        self._recv_all = inner.recv_all  # bound once: an empty poll is most polls
        self.rejections = transport.rejections
        # slot arrays travel with the messages: copied into the named slot once it is checked
        self.carries = not transport.shares_memory

    def __getattr__(self, name: str) -> Any:  # the transport's `wait` reaches the socket
        return getattr(self.inner, name)

    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        messages = self._recv_all(limit)
        if not messages:
            return messages
        out, check, carries = [], self.schema.check, self.carries
        for message in messages:
            try:
                fill = check(message, carries)
            except Malformed as error:
                self.rejections.reject(self.name, error)
                continue
            if fill is not None:
                fill_slot(*fill, message.frames)  # sizes checked above: cannot fail
            out.append(message)
        return out


def checked(transport: Transport, receiver: Receiver, name: str, schema: Schema | Kinds) -> Receiver:
    """`receiver` (of stream `name`) returning only what `schema` allows; the rest is dropped and
    counted in `transport.rejections`."""
    return CheckedReceiver(transport, receiver, name, schema)
