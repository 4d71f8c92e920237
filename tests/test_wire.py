"""The wire decoder (srl.streams.wire), fuzzed: whatever bytes arrive, `decode` and `fill_slot`
either deliver exactly what a holder of the secret sent or raise WireError; never another
exception, never a partial write. Small limits keep oversized cases cheap to generate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srl.streams.layout import ArraySpec, Layout
from srl.streams.wire import MAC_BYTES, Limits, WireError, decode, encode, fill_slot, slot_frames

SECRET = b"k" * 32
LIMITS = Limits(max_frames=4, max_frame_bytes=64)
FUZZ = settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

int64s = st.integers(-(2**63), 2**63 - 1)
headers = st.lists(int64s, min_size=1, max_size=64)
frames = st.lists(st.binary(max_size=LIMITS.max_frame_bytes), max_size=LIMITS.max_frames)


def parts_of(header, payload, secret=SECRET, stream="s") -> list[bytes]:
    return [bytes(p) for p in encode(secret, stream, header, payload)]


@FUZZ
@given(headers, frames)
def test_round_trip(header, payload):
    message = decode(SECRET, "s", parts_of(header, payload), LIMITS).message
    assert message.header == tuple(header) and [bytes(f) for f in message.frames] == payload


@FUZZ
@given(st.lists(st.binary(max_size=600), max_size=8))
def test_arbitrary_parts_raise_only_wire_error(parts):
    with pytest.raises(WireError):
        decode(SECRET, "s", parts, LIMITS)


@FUZZ
@given(headers, frames, st.data())
def test_any_change_to_a_signed_message_is_refused(header, payload, data):
    """Flip a bit, truncate, extend, drop, duplicate or reorder parts: never delivered."""
    parts = parts_of(header, payload)
    i = data.draw(st.integers(0, len(parts) - 1), label="part")
    how = data.draw(st.sampled_from(["flip", "truncate", "extend", "drop", "duplicate", "swap"]), label="how")
    if how == "flip" and parts[i]:
        at = data.draw(st.integers(0, len(parts[i]) - 1), label="byte")
        bit = 1 << data.draw(st.integers(0, 7), label="bit")
        parts[i] = parts[i][:at] + bytes([parts[i][at] ^ bit]) + parts[i][at + 1 :]
    elif how == "truncate" and parts[i]:
        parts[i] = parts[i][: data.draw(st.integers(0, len(parts[i]) - 1), label="keep")]
    elif how == "extend":
        parts[i] = parts[i] + data.draw(st.binary(min_size=1, max_size=16), label="tail")
    elif how == "drop":
        del parts[i]
    elif how == "duplicate":
        parts.insert(i, parts[i])
    elif how == "swap" and i + 1 < len(parts) and parts[i] != parts[i + 1]:
        parts[i], parts[i + 1] = parts[i + 1], parts[i]
    else:
        parts.append(b"")  # the drawn change was a no-op here: an extra empty frame instead
    with pytest.raises(WireError):
        decode(SECRET, "s", parts, LIMITS)


@FUZZ
@given(headers, frames)
def test_another_secret_or_stream_is_refused(header, payload):
    with pytest.raises(WireError, match="MAC"):
        decode(SECRET, "s", parts_of(header, payload, secret=b"x" * 32), LIMITS)
    with pytest.raises(WireError, match="MAC"):
        decode(SECRET, "s", parts_of(header, payload, stream="t"), LIMITS)  # no replay across streams


@FUZZ
@given(headers, st.integers(1, 8), st.integers(0, LIMITS.max_frames - 1))
def test_oversized_frames_and_too_many_frames_are_refused_before_the_mac(header, extra, at):
    """Even correctly signed: a receiver's limits hold whoever the sender is."""
    big = [b""] * LIMITS.max_frames
    big[at] = b"x" * (LIMITS.max_frame_bytes + extra)
    with pytest.raises(WireError, match="at most"):
        decode(SECRET, "s", parts_of(header, big), LIMITS)
    with pytest.raises(WireError, match="frames; at most"):
        decode(SECRET, "s", parts_of(header, [b""] * (LIMITS.max_frames + extra)), LIMITS)


SEAL = b"\0" * 24


@pytest.mark.parametrize(
    "parts,match",
    [
        ([], "0 parts"),
        ([b"\0" * MAC_BYTES], "1 parts"),
        ([b"\0" * 31, SEAL, b"\0" * 8], "MAC of 31"),
        ([b"\0" * MAC_BYTES, b"\0" * 7, b"\0" * 8], "seal of 7"),
        ([b"\0" * MAC_BYTES, SEAL, b""], "header of 0"),
        ([b"\0" * MAC_BYTES, SEAL, b"\0" * 12], "header of 12"),
        ([b"\0" * MAC_BYTES, SEAL, b"\0" * 8 * 65], "header of 520"),
        ([b"\0" * MAC_BYTES, SEAL, b"\0" * 8], "bad MAC"),
    ],
)
def test_each_malformation_is_named(parts, match):
    with pytest.raises(WireError, match=match):
        decode(SECRET, "s", parts, LIMITS)


LAYOUT = Layout({"obs": ArraySpec((3, 2), np.dtype(np.float32)), "done": ArraySpec((3,), np.dtype(np.bool_))})


@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=4))
def test_fill_slot_takes_only_frames_that_match_the_layout(payload):
    slot = LAYOUT.views(bytearray(LAYOUT.nbytes))
    before = {k: v.copy() for k, v in slot.items()}
    sizes = [slot["obs"].nbytes, slot["done"].nbytes]
    if [len(f) for f in payload] == sizes:
        fill_slot(slot, ["obs", "done"], payload)
        assert slot["obs"].tobytes() == payload[0] and slot["done"].view(np.uint8).tobytes() == payload[1]
    else:
        with pytest.raises(WireError):
            fill_slot(slot, ["obs", "done"], payload)
        assert all((slot[k] == before[k]).all() for k in slot), "a refused message wrote into the slot"


def test_slot_round_trip_through_the_wire():
    rng = np.random.default_rng(0)
    sent, got = (LAYOUT.views(bytearray(LAYOUT.nbytes)) for _ in range(2))
    sent["obs"][:] = rng.random((3, 2))
    sent["done"][:] = [True, False, True]
    message = decode(SECRET, "s", parts_of((1,), slot_frames(sent, ["obs", "done"])), LIMITS).message
    fill_slot(got, ["obs", "done"], message.frames)
    assert (got["obs"] == sent["obs"]).all() and got["done"].tolist() == [True, False, True]


def test_carry_wraps_endpoints_only_where_memory_is_not_shared():
    """shm/inline get their sender back unchanged; elsewhere a slot sender sends exactly the
    named arrays of the slot the header names, and refuses other frames; the receiving schema
    copies them into its own slot, and drops (counts) a message whose frames do not fit it."""
    from srl.streams.carry import SlotSender, carry_out, every_array, slot_at
    from srl.streams.inline import InlineTransport
    from srl.streams.schema import INDEX, Schema, checked

    class Unshared(InlineTransport):
        shares_memory = False

    slots = {(0, 1): LAYOUT.views(bytearray(LAYOUT.nbytes)), (0, 2): LAYOUT.views(bytearray(LAYOUT.nbytes))}
    theirs = {key: LAYOUT.views(bytearray(LAYOUT.nbytes)) for key in slots}
    shared = InlineTransport()
    assert carry_out(shared, shared.sender("q"), slot_at(slots, 0, 1)) is shared.sender("q")
    unshared = Unshared()
    out = carry_out(unshared, unshared.sender("q"), slot_at(slots, 0, 1))
    fields = {"actor": INDEX, "split": INDEX, "key": INDEX}
    inbox = checked(unshared, unshared.receiver("q"), "q", Schema(fields, slot_at(theirs, 0, 1), every_array))
    assert isinstance(out, SlotSender)
    slots[(0, 2)]["obs"][:] = 5
    slots[(0, 2)]["done"][:] = True
    out.send((0, 2, 9))
    (message,) = inbox.recv_all()
    assert message.header == (0, 2, 9) and len(message.frames) == 2
    assert (theirs[(0, 2)]["obs"] == 5).all() and theirs[(0, 2)]["done"].all()
    assert not theirs[(0, 1)]["done"].any(), "only the named slot is written"
    obs_only = Schema(fields, slot_at(theirs, 0, 1), lambda slot: ["obs"])
    carry_out(unshared, unshared.sender("r"), slot_at(slots, 0, 1)).send((0, 1, 0))
    obs_inbox = checked(unshared, unshared.receiver("r"), "r", obs_only)
    assert obs_inbox.recv_all() == []  # it carried every array, not obs only
    assert unshared.take_rejected() == {"r": 1}
    with pytest.raises(ValueError, match="nothing else"):
        out.send((0, 1), [b"extra"])
