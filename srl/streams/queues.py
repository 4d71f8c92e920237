"""Bounded queues: what one peer of a stream can make a process hold, in bytes, and what happens
at the bound (docs/security.md, "Bounded queues").

ZeroMQ bounds a queue in messages (its high-water mark, HWM), per peer (per pipe); a stream's
messages range from a 40-byte header to a policy's parameters (MiBs). So each socket's HWM is the
run's byte budget (`max_queued_bytes_per_peer`) over the largest message of its stream, and at
least one, or the stream could not carry its largest message at all. At the bound:

- PUSH (`Transport.sender`) blocks: back-pressure from a slow receiver. A send waits at most
  `SEND_TIMEOUT_S`, then the message is dropped and counted (`dropped_messages`), so a receiver
  that never reads cannot hang a worker. Streams whose messages are all needed (samples, inference,
  releases, batches) are flow-controlled by the slots in flight and never reach the bound: their
  messages in flight to one peer must fit the budget, checked before launch (srl.streams.tcp_setup).
- PULL (`receiver`) stops reading from a peer once that peer's queue is full; the peer's PUSH then
  blocks. A stranger that connects and sends can make the owner hold the budget, no more.
- PUB (`publisher`) drops a slow subscriber's messages (ZeroMQ's PUB never blocks).
- `NEWEST_ONLY` streams keep one message per peer where they send (ZeroMQ's CONFLATE, which ignores
  the HWM): a subscriber wants the newest parameters, never a backlog of old ones. Over tcp their
  receivers keep the budget's count instead: libzmq aborts the process when a conflating socket
  receives a multipart message, which any stranger can send (on ipc only this user's processes
  connect, and srl sends one frame a message).
"""

from __future__ import annotations

import logging

import zmq

from srl.streams.rejections import Tally

log = logging.getLogger(__name__)
DEFAULT_MAX_QUEUED_BYTES = 64 << 20  # the config's default (srl.config: max_queued_bytes_per_peer)
SEND_TIMEOUT_S = 1.0  # a blocked send gives up after this (far below any heartbeat timeout)
KERNEL_BUFFER_BYTES = 4 << 20  # tcp: at most this in each kernel buffer (SO_SNDBUF, SO_RCVBUF)
# parameters in (trainer -> service) and out (service -> subscribers): only the newest matters
# (srl.streams.params: intermediate versions may be skipped)
NEWEST_ONLY = ("params.in", "params.out")


def newest_only(name: str) -> bool:
    """A parameter stream: the service's, or a relay's (relay{h}.params.out, srl.streams.params)."""
    head, _, rest = name.partition(".")
    return name in NEWEST_ONLY or (head.startswith("relay") and head[5:].isdigit() and rest in NEWEST_ONLY)


def messages_within(budget_bytes: int, message_bytes: int) -> int:
    """The queue length (a ZeroMQ HWM) that holds at most `budget_bytes` of messages of up to
    `message_bytes` each; at least 1."""
    return max(1, budget_bytes // max(1, message_bytes))


def bound_socket(socket: zmq.Socket, messages: int | None, kernel_bytes: int | None = None) -> None:
    """Set a socket's queue bound, before it binds or connects (ZeroMQ sizes a pipe when it makes
    one): `messages` per peer, or None: the newest only; `kernel_bytes` per kernel buffer."""
    if messages is None:  # one packed frame a message (srl.streams.framing), so conflating keeps it whole
        socket.setsockopt(zmq.CONFLATE, 1)
    else:
        socket.setsockopt(zmq.SNDHWM, messages)
        socket.setsockopt(zmq.RCVHWM, messages)
    socket.setsockopt(zmq.SNDTIMEO, int(SEND_TIMEOUT_S * 1000))
    if kernel_bytes is not None:
        socket.setsockopt(zmq.SNDBUF, kernel_bytes)
        socket.setsockopt(zmq.RCVBUF, kernel_bytes)


class Drops(Tally):
    """Messages a process dropped at a bound, per stream: counted for the run's metrics
    (`take`), logged at most once per srl.streams.rejections.LOG_EVERY_S per stream, never silently."""

    def send(self, socket: zmq.Socket, data: bytes, name: str) -> bool:
        """Send `data`, or drop it (False) when the socket's queue stays full for SEND_TIMEOUT_S."""
        try:
            socket.send(data, copy=False)
            return True
        except zmq.Again:
            self.add(name, 1, f"a send found the queue full for {SEND_TIMEOUT_S:g} s (the receiver does not read)")
            return False

    def add(self, name: str, count: int, why: str) -> None:
        if self._count(name, count) is not None:
            log.warning("stream %s: %s; %d message(s) dropped in all", name, why, self.total[name])
