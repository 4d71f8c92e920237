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
made by the launcher (srl.streams.tcp_setup) and handed to every worker with the secret.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import zmq

from srl.streams.framing import FramingError, pack, unpack
from srl.streams.layout import Layout
from srl.streams.local import close_sockets, wait_on_sockets
from srl.streams.rejections import Rejections
from srl.streams.transport import Message, Receiver, Sender, Transport
from srl.streams.wire import Freshness, Limits, Sealer, WireError, decode, encode

WILDCARDS = ("0.0.0.0", "::", "*")
# publishers whose subscribers need only the newest message (srl.streams.params: intermediate
# versions may be skipped): a subscriber that does not read holds one message, not a queue
NEWEST_ONLY = ("params.out",)


@dataclass(frozen=True)
class Wire:
    """What a process needs to join a run's tcp streams."""

    secret: bytes = field(repr=False)  # never in a log line or traceback
    ports: Mapping[str, int]  # stream name -> the port its owner (receiver/publisher) binds
    bind_host: str = "127.0.0.1"  # the interface owners bind; loopback unless the run says otherwise
    hosts: Mapping[str, str] = field(default_factory=dict)  # stream name -> host others connect to
    limits: Limits = Limits()

    def port(self, name: str) -> int:
        try:
            return self.ports[name]
        except KeyError:
            raise KeyError(
                f"stream {name!r} has no tcp port; the launcher allocates one per stream"
            ) from None

    def bind_address(self, name: str) -> str:
        host = "*" if self.bind_host in WILDCARDS else self.bind_host
        return f"tcp://{_bracket(host)}:{self.port(name)}"

    def connect_address(self, name: str) -> str:
        default = "127.0.0.1" if self.bind_host in WILDCARDS else self.bind_host
        return f"tcp://{_bracket(self.hosts.get(name, default))}:{self.port(name)}"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class _SignedReceiver(Receiver):
    def __init__(self, socket: zmq.Socket, wire: Wire, name: str, rejections: Rejections, not_before_ns: int) -> None:
        self.socket, self.wire, self.name = socket, wire, name
        self.freshness = Freshness(wire.limits.max_age_s, not_before_ns)
        self.rejected = 0  # messages dropped here: malformed, not signed by the run, or replayed
        self._rejections = rejections  # the transport's, per stream

    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        out: list[Message] = []
        while len(out) < limit:
            try:
                frame = self.socket.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                break
            try:
                sealed = decode(self.wire.secret, self.name, self._parts(frame), self.wire.limits)
                self.freshness.check(sealed)
                out.append(sealed.message)
            except (FramingError, WireError) as error:
                self._reject(error)
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
    def __init__(self, socket: zmq.Socket, wire: Wire, name: str) -> None:
        self.socket, self.wire, self.name = socket, wire, name
        self.sealer = Sealer()  # made in the process that sends: a forked copy must not send

    def send(self, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()) -> None:
        # copy=True: zmq owns the bytes when send returns; the caller may reuse its arrays at once
        parts = encode(self.wire.secret, self.name, header, frames, self.sealer.next())
        self.socket.send(pack(parts), copy=False)


class TcpTransport(Transport):
    shares_memory = False

    def __init__(self, wire: Wire, restarted_ns: int = 0) -> None:
        """`restarted_ns`: a restarted worker's restart time; its receivers refuse messages sent
        before it, which were meant for its dead predecessor (a fresh receiver has no memory of
        their senders' sequence numbers, so this is what refuses them when recorded and replayed)."""
        self.wire, self.restarted_ns = wire, restarted_ns
        self.context = zmq.Context()
        self._sockets: list[zmq.Socket] = []
        self._publishers: dict[str, _SignedSender] = {}
        self._blocks: dict[str, bytearray] = {}
        self._pollers: dict[tuple[int, ...], zmq.Poller] = {}
        self._max_message_bytes = wire.limits.max_message_bytes

    def _socket(self, kind: int) -> zmq.Socket:
        socket = self.context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        self._sockets.append(socket)
        return socket

    def _listen(self, kind: int, name: str) -> zmq.Socket:
        socket = self._socket(kind)
        # zmq drops the connection of a peer that sends a bigger frame, before buffering it
        socket.setsockopt(zmq.MAXMSGSIZE, self._max_message_bytes)
        socket.bind(self.wire.bind_address(name))
        return socket

    def receiver(self, name: str) -> Receiver:
        return _SignedReceiver(self._listen(zmq.PULL, name), self.wire, name, self.rejections, self.restarted_ns)

    def sender(self, name: str) -> Sender:
        socket = self._socket(zmq.PUSH)
        socket.setsockopt(zmq.SNDHWM, 0)  # bounded by the slots in flight, as on shm
        socket.connect(self.wire.connect_address(name))
        return _SignedSender(socket, self.wire, name)

    def publisher(self, name: str) -> Sender:
        if name not in self._publishers:
            socket = self._socket(zmq.PUB)
            if name in NEWEST_ONLY:  # one packed frame a message, so conflating keeps it whole
                socket.setsockopt(zmq.CONFLATE, 1)
            socket.setsockopt(zmq.MAXMSGSIZE, self._max_message_bytes)
            socket.bind(self.wire.bind_address(name))
            self._publishers[name] = _SignedSender(socket, self.wire, name)
        return self._publishers[name]

    def subscriber(self, name: str) -> Receiver:
        socket = self._socket(zmq.SUB)
        socket.setsockopt(zmq.MAXMSGSIZE, self._max_message_bytes)
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        socket.connect(self.wire.connect_address(name))
        return _SignedReceiver(socket, self.wire, name, self.rejections, self.restarted_ns)

    def arrays(self, name: str, layout: Layout) -> dict[str, np.ndarray]:
        """This process's own copy of block `name`: filled by the messages that carry it."""
        if name not in self._blocks:
            self._blocks[name] = bytearray(layout.nbytes)
        return layout.views(self._blocks[name])

    def wait(self, receivers: Sequence[Receiver], timeout_s: float) -> None:
        wait_on_sockets(self._pollers, receivers, timeout_s)

    def close(self) -> None:
        close_sockets(self._sockets, self.context)
