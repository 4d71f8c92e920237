"""srl.streams.framing: a message's parts packed into one ZeroMQ frame. Fuzzed: any bytes
unpack to parts that pack back to the same bytes, or raise FramingError, never another error."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srl.streams.framing import FramingError, pack, packed_bytes, unpack

FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=10))
def test_round_trip(parts):
    packed = pack(parts)
    assert len(packed) == packed_bytes(len(parts), sum(map(len, parts)))
    assert [bytes(p) for p in unpack(packed, max_parts=10)] == parts


@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes_unpack_or_raise_framing_error(raw):
    try:
        parts = unpack(raw, max_parts=8)
    except FramingError:
        return
    assert pack(parts) == raw, "what unpacks is exactly what was packed"


def test_the_part_count_is_checked_before_the_table_is_read():
    with pytest.raises(FramingError, match="at most 3"):
        unpack((1 << 31).to_bytes(4, "little"), max_parts=3)
    with pytest.raises(FramingError, match="add up"):
        unpack(pack([b"abc"]) + b"x", max_parts=3)
