"""Transport: how a worker's streams signal each other and where their arrays live.

Every stream (inference, samples, parameters, control) is written once against this interface;
a backend decides the rest:

| backend | arrays | signals | used by |
| --- | --- | --- | --- |
| `InlineTransport` | process memory | in-process queues | launch.launcher=inline (one process) |
| `LocalTransport` | POSIX shared memory | ZeroMQ ipc | launch.launcher=local (one process per worker), transport=shm |
| `TcpTransport` | each process's own copy; a slot's arrays travel as raw frames with its message | ZeroMQ tcp, HMAC-signed | dataflow.transport=tcp with launch.launcher=local (loopback or bind_host) or launch.launcher=ray (workers on any node) |

A *message* is a header of small integers plus optional raw byte frames (arrays). Headers are
int64 vectors and frames are raw buffers: nothing received is ever unpickled.

Patterns: `receiver(name)` / `sender(name)` are many-to-one queues (the receiver owns the
name); `publisher(name)` / `subscriber(name)` broadcast to every current subscriber, and a
subscriber that joins late misses earlier messages (ask again, see srl.streams.params).
"""

from __future__ import annotations

import functools
import struct
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from srl.streams.layout import Layout
from srl.streams.rejections import Rejections


@dataclass
class Message:
    header: tuple[int, ...]
    frames: Sequence[bytes | memoryview] = field(default_factory=list)


# struct, not numpy: a header is packed and unpacked for every message on the sampling hot path,
# and struct does it in a tenth of the time of building and reading a small numpy array.
_HEADER_FORMATS = {n: struct.Struct(f"<{n}q") for n in range(1, 65)}


def as_buffer(frame: bytes | memoryview | np.ndarray) -> bytes | memoryview:
    """A frame's bytes, without a copy where it is contiguous already (an array's as a byte view)."""
    return np.ascontiguousarray(frame).data.cast("B") if isinstance(frame, np.ndarray) else frame


def encode_header(header: Sequence[int]) -> bytes:
    return _HEADER_FORMATS[len(header)].pack(*header)


def decode_header(raw: bytes | memoryview) -> tuple[int, ...]:
    if len(raw) % 8 or len(raw) == 0 or len(raw) > 8 * 64:
        raise ValueError(f"malformed message header of {len(raw)} bytes")
    return _HEADER_FORMATS[len(raw) // 8].unpack(raw)


class Receiver(ABC):
    @abstractmethod
    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        """Every message waiting now (up to `limit`), without blocking."""


class Sender(ABC):
    @abstractmethod
    def send(self, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()) -> None:
        """Queue one message; never blocks on the receiver's progress for small messages."""


class Transport(ABC):
    """One per process; creates stream endpoints and shared arrays by name."""

    # False: `arrays` are this process's own copy, so a stream that hands over a slot must send
    # the slot's arrays with the message (srl.streams.wire.fill_slot on the other side)
    shares_memory = True

    @abstractmethod
    def receiver(self, name: str) -> Receiver: ...

    @abstractmethod
    def sender(self, name: str) -> Sender: ...

    @abstractmethod
    def publisher(self, name: str) -> Sender: ...

    @abstractmethod
    def subscriber(self, name: str) -> Receiver: ...

    @abstractmethod
    def arrays(self, name: str, layout: Layout) -> dict[str, np.ndarray]:
        """The arrays of block `name` (created by the launcher before workers start)."""

    @abstractmethod
    def wait(self, receivers: Sequence[Receiver], timeout_s: float) -> None:
        """Block until one of `receivers` has a message or `timeout_s` passes (no spinning)."""

    @functools.cached_property
    def rejections(self) -> Rejections:
        """Where this process's receivers count what they drop: unsigned or replayed messages
        (srl.streams.tcp) and, on every backend, malformed ones (srl.streams.schema)."""
        return Rejections()

    @functools.cached_property
    def opened(self) -> set[tuple[str, str]]:
        """(stream, "bind" or "connect") for each endpoint this process opened: what srl.graph
        declares for it (tests/test_declared_streams.py compares them, srl.launch.shell.record_opened)."""
        return set()

    def note_opened(self, name: str, how: str) -> None:
        """Record an endpoint opened outside the transport (a torch.distributed group's)."""
        self.opened.add((name, how))

    def take_rejected(self) -> dict[str, int]:
        """Messages this process's receivers dropped, per stream, since the last call."""
        return self.rejections.take()

    def take_dropped(self) -> dict[str, int]:
        """Messages dropped at a queue's bound, per stream, since the last call: sends that found
        their queue full too long, and (tcp) what a receiver's senders skipped (srl.streams.queues)."""
        return {}

    def close(self) -> None:
        """Close sockets and detach from shared memory."""
