"""The wire format of streams that leave the machine: signed, sealed messages of raw frames, the
parts packed into one ZeroMQ frame on the socket (srl.streams.framing).

    part 0   MAC: HMAC-SHA256(the stream's key, seal, header, every frame, each length-prefixed)
    part 1   seal: sender id (random per sender endpoint), sequence number (1, 2, ...), send time (ns)
    part 2   header: 1..64 int64 values (srl.streams.transport.encode_header)
    part 3.. frames: raw bytes of arrays (a slot's arrays, parameter tensors) or one JSON report

`decode` is the one door for bytes read from a socket. It checks the shape of the message
against `Limits` before it looks at content, then the MAC, then the header; any failure raises
`WireError` and nothing else. Nothing is unpickled: frames stay bytes until a stream copies
them into arrays whose layout it declared itself (`fill_slot`, which checks every size).

Each stream signs with its own key, derived from the run's secret and the stream's name (a
stream has one direction: its owner receives or publishes), so a message captured on one stream
cannot be replayed into another. Within a stream, the seal is what `Freshness` checks: a
receiver takes from each sender only sequence numbers above the last it took, sent no longer than
`Limits.max_age_s` ago, so a recorded message resent later, once or a thousand times, is refused.
A sender restarted in a new process draws a new id and starts again at 1. What remains: a
receiver that itself restarts knows no sender yet, and would take once the newest message of
each sender recorded in the last `max_age_s` (see docs/security.md).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srl.streams.framing import packed_bytes
from srl.streams.transport import Message, as_buffer, decode_header, encode_header

MAC_BYTES = 32  # SHA-256
MAX_HEADER_BYTES = 8 * 64
_DOMAIN = b"srl-wire-2"  # changes with the format, so an old peer's messages fail the MAC
_SEAL = struct.Struct("<QQq")  # sender id, sequence number, send time (ns since the epoch)


class WireError(ValueError):
    """A received message that must not be delivered: malformed, oversized or not signed by the run."""


@dataclass(frozen=True)
class Limits:
    """What a receiver accepts; anything larger is refused before it is looked at."""

    max_frames: int = 256  # frames after the header
    max_frame_bytes: int = 64 << 20
    # a message sent longer ago than this is refused (allow for the clocks of the run's hosts)
    max_age_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_frames < 0 or self.max_frame_bytes < 1 or not self.max_age_s > 0:
            raise ValueError(f"limits must be positive, got {self}")

    @property
    def max_message_bytes(self) -> int:
        """The largest packed message (MAC, header, frames) a receiver lets zmq buffer."""
        return message_bytes([self.max_frame_bytes] * self.max_frames)


def message_bytes(frame_bytes: Sequence[int]) -> int:
    """The size of a packed message (any header) whose frames have these sizes."""
    return packed_bytes(len(frame_bytes) + 3, MAC_BYTES + _SEAL.size + MAX_HEADER_BYTES + sum(frame_bytes))


@functools.lru_cache(maxsize=256)
def stream_key(secret: bytes, stream: str) -> bytes:
    """The key of one stream, derived from the run's secret (HMAC as a key-derivation function)."""
    return hmac.new(secret, _DOMAIN + b"/stream/" + stream.encode(), hashlib.sha256).digest()


def mac(secret: bytes, stream: str, parts: Sequence[bytes | memoryview]) -> bytes:
    """Length-prefixing each part makes the split between parts part of what is signed."""
    h = hmac.new(stream_key(secret, stream), _DOMAIN, hashlib.sha256)
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


class Sealer:
    """A sender endpoint's seals: its own random id, and the next sequence number."""

    def __init__(self) -> None:
        self.sender_id = int.from_bytes(os.urandom(8), "little")
        self.seq = 0

    def next(self) -> bytes:
        self.seq += 1
        return _SEAL.pack(self.sender_id, self.seq, time.time_ns())


def encode(
    secret: bytes, stream: str, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = (),
    seal: bytes | None = None,
) -> list[bytes | memoryview]:
    """A signed message; `seal` from the sender's `Sealer` (None: a one-off sender's seal)."""
    parts = [Sealer().next() if seal is None else seal, encode_header(header), *(as_buffer(f) for f in frames)]
    return [mac(secret, stream, parts), *parts]


@dataclass(frozen=True)
class Sealed:
    """A received message and who sent it when."""

    message: Message
    sender_id: int
    seq: int
    sent_ns: int


def decode(secret: bytes, stream: str, parts: Sequence[bytes | memoryview], limits: Limits) -> Sealed:
    """The message in `parts`, or WireError. Cheap shape checks first, so a flood of junk
    costs no hashing; the MAC before the header is parsed, so unsigned bytes are never read."""
    if len(parts) < 3:
        raise WireError(f"message of {len(parts)} parts; a MAC, a seal and a header are required")
    if len(parts) - 3 > limits.max_frames:
        raise WireError(f"message of {len(parts) - 3} frames; at most {limits.max_frames} allowed")
    if len(parts[0]) != MAC_BYTES:
        raise WireError(f"MAC of {len(parts[0])} bytes, expected {MAC_BYTES}")
    if len(parts[1]) != _SEAL.size:
        raise WireError(f"seal of {len(parts[1])} bytes, expected {_SEAL.size}")
    if not 8 <= len(parts[2]) <= MAX_HEADER_BYTES or len(parts[2]) % 8:
        raise WireError(f"malformed header of {len(parts[2])} bytes")
    for i, frame in enumerate(parts[3:]):
        if len(frame) > limits.max_frame_bytes:
            raise WireError(f"frame {i} of {len(frame)} bytes; at most {limits.max_frame_bytes} allowed")
    if not hmac.compare_digest(bytes(parts[0]), mac(secret, stream, parts[1:])):
        raise WireError(f"bad MAC on stream {stream!r}: not signed with this run's secret")
    sender_id, seq, sent_ns = _SEAL.unpack(parts[1])
    return Sealed(Message(decode_header(parts[2]), list(parts[3:])), sender_id, seq, sent_ns)


class Freshness:
    """A receiver's memory of its senders: each sender's messages are taken in strictly rising
    sequence and only while younger than `max_age_s`. ZeroMQ delivers one sender's messages in
    order (some may be dropped, never reordered), so anything at or below the last sequence
    taken is a copy. Senders unheard for `max_age_s` are forgotten: their messages are too old.
    Nothing sent before `not_before_ns` is taken: a restarted receiver knows no sender's sequence,
    and what was sent before its restart was meant for its predecessor."""

    def __init__(self, max_age_s: float, not_before_ns: int = 0) -> None:
        self.max_age_ns, self.not_before_ns = int(max_age_s * 1e9), not_before_ns
        self.last_seq: dict[int, int] = {}
        self.last_heard_ns: dict[int, int] = {}
        self._pruned_ns = 0

    def check(self, sealed: Sealed, now_ns: int | None = None) -> None:
        """Take it (remember its sequence) or raise WireError."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        age_ns = now_ns - sealed.sent_ns
        if not -self.max_age_ns <= age_ns <= self.max_age_ns:
            raise WireError(f"message sent {age_ns / 1e9:.1f} s ago, outside the {self.max_age_ns / 1e9:g} s window")
        if sealed.sent_ns < self.not_before_ns:
            raise WireError(f"message sent {(self.not_before_ns - sealed.sent_ns) / 1e9:.3f} s before this "
                            "receiver's restart: meant for its predecessor, or replayed")
        last = self.last_seq.get(sealed.sender_id, 0)
        if sealed.seq <= last:
            raise WireError(f"replayed or duplicated message: sequence {sealed.seq}, already at {last}")
        self.last_seq[sealed.sender_id] = sealed.seq
        self.last_heard_ns[sealed.sender_id] = now_ns
        if now_ns - self._pruned_ns > self.max_age_ns:
            self._prune(now_ns)

    def _prune(self, now_ns: int) -> None:
        self._pruned_ns = now_ns
        for sender in [s for s, t in self.last_heard_ns.items() if now_ns - t > self.max_age_ns]:
            del self.last_seq[sender], self.last_heard_ns[sender]


def slot_frames(slot: dict[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
    return [slot[name] for name in names]


def fill_slot(
    slot: dict[str, np.ndarray], names: Sequence[str], frames: Sequence[bytes | memoryview]
) -> None:
    """Copy received frames into `slot`'s arrays, in `names` order; every size must match the
    layout this process declared, or WireError (and the slot is left untouched)."""
    if len(frames) != len(names):
        raise WireError(
            f"slot message has {len(frames)} frames, the layout has {len(names)} arrays ({list(names)})"
        )
    for name, frame in zip(names, frames):
        if len(frame) != slot[name].nbytes:
            raise WireError(
                f"slot array {name!r}: got {len(frame)} bytes, the layout has {slot[name].nbytes}"
            )
    for name, frame in zip(names, frames):
        target = slot[name]
        np.copyto(target, np.frombuffer(frame, dtype=target.dtype).reshape(target.shape))
