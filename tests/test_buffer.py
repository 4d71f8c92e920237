"""Buffer worker kernel and batch stream, driven by hand over an InlineTransport (no processes)."""

from __future__ import annotations

import numpy as np
import pytest

from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.replay import ReplayMemory, batch_fields, transition_fields
from srl.streams.batches import BatchClient, BatchServer
from srl.streams.inline import InlineTransport
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.workers.buffer import BufferKernel

T, ROWS, B = 4, 2, 4  # steps per segment, rows per segment, batch size
OBS, ACT = FieldSpec((1,), np.float32), FieldSpec((), np.int64)


def segment_arrays():
    return {C.OBS: np.zeros((T + 1, ROWS, 1), np.float32), C.ACTION: np.zeros((T + 1, ROWS), np.int64),
            C.REWARD: np.zeros((T + 1, ROWS), np.float32), C.TERMINATED: np.zeros((T + 1, ROWS), bool),
            C.TRUNCATED: np.zeros((T + 1, ROWS), bool), C.POLICY_VERSION: np.zeros((T + 1, ROWS), np.int64)}


def world(replay_ratio=None, warmup=T * ROWS, prioritized=True):
    transport = InlineTransport()
    segments = {(0, k): segment_arrays() for k in range(2)}
    producer = SampleProducer(transport, 0, segments)
    slots = [{n: np.zeros((B, *f.shape), f.dtype) for n, f in batch_fields(OBS, ACT).items()} for _ in range(2)]
    memory = ReplayMemory(transition_fields(OBS, ACT), 64, prioritized=prioritized, alpha=1.0, seed=0)
    buffer = BufferKernel(
        SampleConsumer(transport, {(0, 0, k): seg for (_, k), seg in segments.items()}),
        BatchServer(transport, slots), memory, gamma=0.5, n_step=2, warmup=warmup,
        replay_ratio=replay_ratio, num_agents=1,
    )
    return producer, buffer, BatchClient(transport, slots)


def send_segment(producer, first, slot=None):
    """A segment whose obs count env steps (obs = first + step), so each transition is traceable."""
    slot = producer.acquire(0) if slot is None else slot
    assert slot is not None, "no free segment slot"
    seg = producer.slots[(0, slot)]
    seg[C.OBS][:, :, 0] = first + np.arange(T + 1)[:, None]
    seg[C.ACTION][:] = (first + np.arange(T + 1))[:, None]
    seg[C.REWARD][:] = 1.0
    producer.send(0, slot)
    return slot


def test_segments_become_transitions_and_batches_carry_them():
    producer, buffer, client = world()
    send_segment(producer, 0)
    assert buffer.poll()
    assert buffer.memory.inserted == T * ROWS
    assert producer.acquire(0) is not None and producer.acquire(0) is not None, "both segment slots released"
    ready = client.poll(limit=8)
    assert [steps for _, steps in ready] == [T * ROWS] * 2  # env steps stored by then
    assert sorted(slot for slot, _ in ready) == [0, 1]  # both batch slots filled, none while held
    assert not buffer.poll()
    batch = client.slots[ready[0][0]]
    t = batch[C.OBS][:, 0]
    np.testing.assert_array_equal(batch[C.ACTION], t)
    np.testing.assert_array_equal(batch[C.NEXT_OBS][:, 0], np.minimum(t + 2, T))  # 2 steps or segment end
    np.testing.assert_allclose(batch[C.REWARD], np.where(t == T - 1, 1.0, 1.5))
    np.testing.assert_allclose(batch[C.DISCOUNT], np.where(t == T - 1, 0.5, 0.25))
    batch[C.PRIORITY][:] = 7.0
    updated = np.unique(batch[C.INDEX])
    client.release(ready[0][0])
    assert buffer.poll()  # priorities read back, the slot refilled at once
    assert buffer.report()["priority_updates"] == B
    np.testing.assert_allclose(buffer.memory.tree.get(updated), 7.0 + 1e-3)  # alpha = 1


def test_no_batch_before_warmup():
    producer, buffer, client = world(warmup=2 * T * ROWS)
    send_segment(producer, 0)
    buffer.poll()
    assert client.poll() == []
    send_segment(producer, 10)
    buffer.poll()
    assert len(client.poll()) == 1


@pytest.mark.parametrize("ratio", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("actor_every,trainer_every", [(1, 3), (3, 1)])
def test_replay_ratio_is_held_both_ways(ratio, actor_every, trainer_every):
    """Transitions sampled after warmup stay within a batch of ratio x stored, whether the actor
    (sending whenever it has a free slot) or the trainer (taking every batch) is the faster."""
    producer, buffer, client = world(replay_ratio=ratio)
    sent = 0
    for step in range(60):
        slot = producer.acquire(0) if step % actor_every == 0 else None
        if slot is not None:
            send_segment(producer, 100 * sent, slot)
            sent += 1
        buffer.poll()
        if step % trainer_every == 0:
            for slot, _ in client.poll(limit=2):
                client.release(slot)
        buffer.poll()
        stored = buffer.memory.inserted - T * ROWS  # after warmup
        assert ratio * stored - T * ROWS * ratio - B <= buffer.sampled <= ratio * stored + B
    assert buffer.memory.inserted >= 5 * T * ROWS, "the run went on"
