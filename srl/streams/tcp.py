"""Cross-machine backend: ZeroMQ over tcp, every message signed, slot arrays carried in frames.

No memory is shared: each process keeps its own copy of the slots it touches (`arrays`), and
the streams send a slot's arrays as raw frames with the message that hands it over (see
`Transport.shares_memory`). Every message is signed with its stream's key and sealed with its
sender's sequence number (srl.streams.wire); a receiver drops and counts what fails `wire.decode`
or is a copy of what it took already (`wire.Freshness`), so neither garbage on a port nor a
recorded message sent again is ever delivered. The drops are counted per stream and logged,
rate-limited but never silenced (`Transport.rejections`, srl.streams.rejections), and reported
to the controller (`rejected_messages`); a signed message of the wrong shape is dropped and
counted the same way by its stream (srl.streams.schema).

Where each stream listens (its port, and the host others reach it at) comes from a `Wire`,
made by the launcher (srl.streams.tcp_setup) and handed to every worker with the secret, with
each stream's largest message: a receiver refuses a larger one (ZeroMQ drops the peer that sends
it), and every queue holds at most `max_queued_bytes` per peer (srl.streams.queues). A receiver
counts the messages a sender's sequence skipped (dropped on the way, at a publisher's bound, say)
as dropped, but on NEWEST_ONLY streams, where skipping old versions is the point.

Each stream's owner listens through srl.streams.listeners: a peer that does not complete ZeroMQ's
handshake within seconds is dropped, a listener keeps at most `Wire.connection_cap` connections
at once, and no process forked later holds the listener.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import zmq

from srl.streams.framing import FramingError, pack, unpack
from srl.streams.layout import Layout
from srl.streams.listeners import (
    HANDSHAKE_IVL_MS,
    WILDCARDS,
    ConnectionCap,
    bind_endpoint,
    bracket,
    connection_cap,
    forget,
)
from srl.streams.local import ZmqTransport
from srl.streams.queues import (
    DEFAULT_MAX_QUEUED_BYTES,
    KERNEL_BUFFER_BYTES,
    Drops,
    bound_socket,
    messages_within,
    newest_only,
)
from srl.streams.rejections import Rejections
from srl.streams.transport import Message, Receiver, Sender
from srl.streams.wire import Freshness, Limits, Sealer, WireError, decode, encode


@dataclass(frozen=True)
class Wire:
    """What a process needs to join a run's tcp streams."""

    secret: bytes = field(repr=False)  # never in a log line or traceback
    ports: Mapping[str, int]  # stream name -> the port its owner (receiver/publisher) binds
    bind_host: str = "127.0.0.1"  # the interface owners bind; loopback unless the run says otherwise
    hosts: Mapping[str, str] = field(default_factory=dict)  # stream name -> host others connect to
    limits: Limits = Limits()
    max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES  # per peer of a stream (srl.streams.queues)
    # stream name -> its largest packed message (srl.streams.tcp_setup); others: limits.max_message_bytes
    message_bytes: Mapping[str, int] = field(default_factory=dict)
    # stream name -> the most connections its listener keeps at once (srl.streams.listeners);
    # others: connection_cap(0)
    connection_caps: Mapping[str, int] = field(default_factory=dict)

    def connection_cap(self, name: str) -> int:
        return self.connection_caps.get(name, connection_cap(0))

    def largest_message(self, name: str) -> int:
        return self.message_bytes.get(name, self.limits.max_message_bytes)

    def port(self, name: str) -> int:
        try:
            return self.ports[name]
        except KeyError:
            raise KeyError(
                f"stream {name!r} has no tcp port; the launcher allocates one per stream"
            ) from None

    def bind_address(self, name: str) -> str:
        return bind_endpoint(self.bind_host, self.port(name))

    def connect_address(self, name: str) -> str:
        default = "127.0.0.1" if self.bind_host in WILDCARDS else self.bind_host
        return f"tcp://{bracket(self.hosts.get(name, default))}:{self.port(name)}"


class _SignedReceiver(Receiver):
    def __init__(self, socket: zmq.Socket, wire: Wire, name: str, rejections: Rejections, drops: Drops,
                 not_before_ns: int) -> None:  # fmt: skip
        self.socket, self.wire, self.name, self.drops = socket, wire, name, drops
        self.freshness = Freshness(wire.limits.max_age_s, not_before_ns)
        self.rejected = 0  # messages dropped here: malformed, not signed by the run, or replayed
        self._rejections = rejections  # the transport's, per stream
        self._get = cast(Callable[[int], int], socket.get)

    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        out: list[Message] = []
        if not self._get(zmq.EVENTS) & zmq.POLLIN:  # most polls find nothing: cheaper than zmq.Again
            return out
        while len(out) < limit:
            try:
                frame = self.socket.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            try:
                sealed = decode(self.wire.secret, self.name, self._parts(frame), self.wire.limits)
                last = self.freshness.last_seq.get(sealed.sender_id)
                self.freshness.check(sealed)
                out.append(sealed.message)
            except (FramingError, WireError) as error:
                self._reject(error)
                continue
            if last is not None and sealed.seq > last + 1 and not newest_only(self.name):
                self.drops.add(self.name, sealed.seq - last - 1, "a sender's messages skipped on the way")
        return out

    def _reject(self, error: Exception) -> None:
        self.rejected += 1
        self._rejections.reject(self.name, error)

    def _parts(self, frame: zmq.Frame) -> list[memoryview]:
        """The parts packed in one frame (srl.streams.framing). srl never sends multipart
        messages: a stranger's is read to its end and refused, however many parts it has."""
        if frame.more:
            while self.socket.getsockopt(zmq.RCVMORE):
                self.socket.recv(copy=False)
            raise FramingError("a multipart message; srl sends one frame per message")
        return unpack(frame.buffer, self.wire.limits.max_frames + 3)  # MAC, seal, header, frames


class _SignedSender(Sender):
    def __init__(self, socket: zmq.Socket, wire: Wire, name: str, drops: Drops) -> None:
        self.socket, self.wire, self.name, self.drops = socket, wire, name, drops
        self.sealer = Sealer()  # made in the process that sends: a forked copy must not send
        self.largest = wire.largest_message(name)

    def send(self, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()) -> None:
        # pack copies: zmq owns the bytes when send returns; the caller may reuse its arrays at once
        data = pack(encode(self.wire.secret, self.name, header, frames, self.sealer.next()))
        if len(data) > self.largest:  # its receivers would drop the connection, without a word
            raise WireError(f"stream {self.name!r}: a message of {len(data)} bytes, larger than the "
                            f"{self.largest} its receivers take (srl.graph.Graph.message_bytes)")
        if not self.drops.send(self.socket, data, self.name):
            self.sealer.seq -= 1  # never sent: its number goes to the next, so no receiver counts a gap too


class TcpTransport(ZmqTransport):
    shares_memory = False

    def __init__(self, wire: Wire, restarted_ns: int = 0, max_sockets: int = 0) -> None:
        """`restarted_ns`: a restarted worker's restart time; its receivers refuse messages sent
        before it, which were meant for its dead predecessor (a fresh receiver has no memory of
        their senders' sequence numbers, so this is what refuses them when recorded and replayed).
        `max_sockets`: see ZmqTransport."""
        super().__init__(max_sockets)
        self.wire, self.restarted_ns = wire, restarted_ns
        self._blocks: dict[str, bytearray] = {}
        self.connections = ConnectionCap(self.context)  # each listener's cap (srl.streams.listeners)
        self._listening: list[int] = []  # its listeners' descriptors

    def _bound(self, socket: zmq.Socket, kind: int, name: str) -> None:
        largest = self.wire.largest_message(name)
        # zmq drops the connection of a peer that sends a bigger message, before buffering it
        socket.setsockopt(zmq.MAXMSGSIZE, largest)
        socket.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_IVL_MS)  # a silent peer's connection ends
        budget = self.wire.max_queued_bytes
        conflate = newest_only(name) and kind in (zmq.PUB, zmq.PUSH)  # see srl.streams.queues
        messages = None if conflate else messages_within(budget, largest)
        bound_socket(socket, messages, min(budget, KERNEL_BUFFER_BYTES))

    def _address(self, name: str, bind: bool) -> str:
        return self.wire.bind_address(name) if bind else self.wire.connect_address(name)

    def _bind(self, socket: zmq.Socket, name: str) -> None:
        """On a descriptor of its own that forked children close, its connections capped."""
        cap = self.wire.connection_cap(name)
        fd, _ = self.connections.bind(socket, name, self.wire.bind_host, self.wire.port(name), cap)
        self._listening.append(fd)

    def _receiving(self, socket: zmq.Socket, name: str) -> Receiver:
        return _SignedReceiver(socket, self.wire, name, self.rejections, self._drops, self.restarted_ns)

    def _sending(self, socket: zmq.Socket, name: str) -> Sender:
        return _SignedSender(socket, self.wire, name, self._drops)

    def close(self) -> None:
        self.connections.close()
        for fd in self._listening:
            forget(fd)
        self._listening.clear()
        super().close()

    def arrays(self, name: str, layout: Layout) -> dict[str, np.ndarray]:
        """This process's own copy of block `name`: filled by the messages that carry it."""
        if name not in self._blocks:
            self._blocks[name] = bytearray(layout.nbytes)
        return layout.views(self._blocks[name])
