"""One ZeroMQ frame per message, on every transport.

libzmq 4.3 aborts a process whose peer's connection breaks while that process's session is in
the middle of a multipart message (`session_base_t::clean_pipes`, "Resource temporarily
unavailable (src/session_base.cpp)"; libzmq issue #3442). A SIGKILLed worker, or a stranger
that connects to a port and leaves, could then take a healthy process down. A message whose
parts are packed into one frame is never half-sent, so that path is never taken.

Format: a u32 part count, one u64 length per part, then the parts back to back.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

_COUNT = struct.Struct("<I")


class FramingError(ValueError):
    """Bytes that are not a packed message within the receiver's limits."""


def packed_bytes(part_count: int, payload_bytes: int) -> int:
    """Size of a packed message: what a receiver's size limit must allow."""
    return _COUNT.size + 8 * part_count + payload_bytes


def pack(parts: Sequence[bytes | memoryview]) -> bytes:
    sizes = [memoryview(p).nbytes for p in parts]
    return b"".join([struct.pack(f"<I{len(sizes)}Q", len(sizes), *sizes), *parts])


def unpack(buf: bytes | memoryview, max_parts: int) -> list[memoryview]:
    """The parts of `buf` as views into it (no copy), or FramingError: the count is checked
    against `max_parts` before the table is read, and the lengths must add up to the buffer."""
    view = memoryview(buf).cast("B")
    if view.nbytes < _COUNT.size:
        raise FramingError(f"message of {view.nbytes} bytes; too short for a part count")
    (count,) = _COUNT.unpack_from(view)
    if count > max_parts:
        raise FramingError(f"message of {count} parts; at most {max_parts} allowed")
    table_end = _COUNT.size + 8 * count
    if view.nbytes < table_end:
        raise FramingError(f"message of {view.nbytes} bytes; too short for {count} part lengths")
    sizes = struct.unpack_from(f"<{count}Q", view, _COUNT.size)
    if table_end + sum(sizes) != view.nbytes:
        raise FramingError(f"part lengths add up to {sum(sizes)}, the message carries {view.nbytes - table_end}")
    parts, at = [], table_end
    for size in sizes:
        parts.append(view[at : at + size])
        at += size
    return parts
