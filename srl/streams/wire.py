"""The wire format of streams that leave the machine: signed messages of raw frames, the parts
packed into one ZeroMQ frame on the socket (srl.streams.framing).

    part 0   MAC: HMAC-SHA256(run secret, stream name, every later part, each length-prefixed)
    part 1   header: 1..64 int64 values (srl.streams.transport.encode_header)
    part 2.. frames: raw bytes of arrays (a slot's arrays, parameter tensors) or one JSON report

`decode` is the one door for bytes read from a socket. It checks the shape of the message
against `Limits` before it looks at content, then the MAC, then the header; any failure raises
`WireError` and nothing else. Nothing is unpickled: frames stay bytes until a stream copies
them into arrays whose layout it declared itself (`fill_slot`, which checks every size).

The stream name is inside the MAC, so a message captured on one stream cannot be replayed into
another. Replay within a stream is not prevented (no sequence numbers): the secret protects
against foreign senders, not against an attacker who can record and resend this run's traffic.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from srl.streams.framing import packed_bytes
from srl.streams.transport import Message, decode_header, encode_header

MAC_BYTES = 32  # SHA-256
MAX_HEADER_BYTES = 8 * 64
_DOMAIN = b"srl-wire-1"  # changes with the format, so an old peer's messages fail the MAC


class WireError(ValueError):
    """A received message that must not be delivered: malformed, oversized or not signed by the run."""


@dataclass(frozen=True)
class Limits:
    """What a receiver accepts; anything larger is refused before it is looked at."""

    max_frames: int = 256  # frames after the header
    max_frame_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.max_frames < 0 or self.max_frame_bytes < 1:
            raise ValueError(f"limits must be positive, got {self}")

    @property
    def max_message_bytes(self) -> int:
        """The largest packed message (MAC, header, frames) a receiver lets zmq buffer."""
        return packed_bytes(self.max_frames + 2, MAC_BYTES + MAX_HEADER_BYTES + self.max_frames * self.max_frame_bytes)


def _as_bytes(frame: bytes | memoryview | np.ndarray) -> bytes | memoryview:
    if isinstance(frame, np.ndarray):
        return memoryview(np.ascontiguousarray(frame)).cast("B")
    return frame


def mac(secret: bytes, stream: str, parts: Sequence[bytes | memoryview]) -> bytes:
    """Length-prefixing each part makes the split between parts part of what is signed."""
    h = hmac.new(secret, _DOMAIN, hashlib.sha256)
    h.update(len(stream.encode()).to_bytes(8, "little") + stream.encode())
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


def encode(
    secret: bytes, stream: str, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()
) -> list[bytes | memoryview]:
    parts = [encode_header(header), *(_as_bytes(f) for f in frames)]
    return [mac(secret, stream, parts), *parts]


def decode(secret: bytes, stream: str, parts: Sequence[bytes | memoryview], limits: Limits) -> Message:
    """The message in `parts`, or WireError. Cheap shape checks first, so a flood of junk
    costs no hashing; the MAC before the header is parsed, so unsigned bytes are never read."""
    if len(parts) < 2:
        raise WireError(f"message of {len(parts)} parts; a MAC and a header are required")
    if len(parts) - 2 > limits.max_frames:
        raise WireError(f"message of {len(parts) - 2} frames; at most {limits.max_frames} allowed")
    if len(parts[0]) != MAC_BYTES:
        raise WireError(f"MAC of {len(parts[0])} bytes, expected {MAC_BYTES}")
    if not 8 <= len(parts[1]) <= MAX_HEADER_BYTES or len(parts[1]) % 8:
        raise WireError(f"malformed header of {len(parts[1])} bytes")
    for i, frame in enumerate(parts[2:]):
        if len(frame) > limits.max_frame_bytes:
            raise WireError(f"frame {i} of {len(frame)} bytes; at most {limits.max_frame_bytes} allowed")
    if not hmac.compare_digest(bytes(parts[0]), mac(secret, stream, parts[1:])):
        raise WireError(f"bad MAC on stream {stream!r}: not signed with this run's secret")
    return Message(decode_header(parts[1]), list(parts[2:]))


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
