"""Stream conformance: each case is written once and runs on every transport backend.

`world()` gives the transport of one more endpoint of the same run: the one shared
`InlineTransport` (inline), a new `LocalTransport` with its own zmq context on the run's ipc
dir (local), or a new `TcpTransport` with its own zmq context on loopback ports, signed with the
run's secret (tcp; its own memory, so slot arrays travel in the messages). `world.declare`
creates a shared block up front, as the launcher does. The tcp backend between real processes:
`test_tcp_between_processes` here, and the counting pipeline in tests/test_pipeline.py.
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time

import numpy as np
import pytest
import torch

from srl.graph import sub_arrays
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, STOP, Kind, Role, WorkerLink, decode_report
from srl.streams.inference import InferenceClient, InferenceServer
from srl.streams.inline import InlineTransport
from srl.streams.layout import ArraySpec, Layout
from srl.streams.local import LocalTransport, SharedBlocks, make_ipc_dir
from srl.streams.params import (
    SERVICE_OUT,
    ParamPublisher,
    ParamSubscriber,
    load_frames,
    state_frames,
    tensor_bytes,
)
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.streams.tcp import TcpTransport, Wire
from srl.streams.tcp_setup import free_ports
from srl.streams.transport import Message, decode_header, encode_header
from srl.workers.params import ParamServiceKernel

DEADLINE_S = 5.0
KINDS = ["inline", "local", "tcp"]


class LoopbackPorts(dict):
    """A free loopback port for each stream name, allocated on first use (the launcher
    allocates them all up front from the graph instead)."""

    def __missing__(self, name: str) -> int:
        self[name] = free_ports("127.0.0.1", 1)[0]
        return self[name]


def loopback_wire() -> Wire:
    # a run's wire sizes each stream's queues by its largest message (tests/test_queues.py); these
    # streams carry any message the default limits allow, so they get a budget that queues dozens
    return Wire(secrets.token_bytes(32), LoopbackPorts(), max_queued_bytes=1 << 40)


class World:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.run_id = "t" + secrets.token_hex(4)
        self.inline = InlineTransport() if kind == "inline" else None
        self.ipc_dir = make_ipc_dir(self.run_id) if kind == "local" else None
        self.wire = loopback_wire() if kind == "tcp" else None
        self.transports, self.blocks = [], []  # zmq transports and SharedBlocks to close at the end

    def __call__(self):
        if self.inline is not None:
            return self.inline
        transport = LocalTransport(self.run_id, self.ipc_dir) if self.wire is None else TcpTransport(self.wire)
        self.transports.append(transport)
        return transport

    def declare(self, name: str, layout: Layout) -> None:
        if self.kind == "local":
            self.blocks.append(SharedBlocks(self.run_id, {name: layout}))

    def settle(self) -> None:
        """Time for in-flight local messages to land, before checking that nothing more came."""
        time.sleep(0.0 if self.kind == "inline" else 0.2)

    def close(self) -> None:
        for transport in self.transports:
            transport.close()
        for blocks in self.blocks:
            blocks.unlink()
        if self.ipc_dir is not None:
            shutil.rmtree(self.ipc_dir, ignore_errors=True)


@pytest.fixture(params=KINDS)
def world(request):
    w = World(request.param)
    yield w
    w.close()


@pytest.fixture(params=[kind for kind in KINDS if kind != "tcp"])
def sharing_world(request):
    """The backends whose endpoints share memory (tcp endpoints own theirs: slot contents travel in
    messages, tested with `world`)."""
    w = World(request.param)
    yield w
    w.close()


def gather(fetch, n: int) -> list:
    """Call `fetch()` (returns a list) until `n` items came or the deadline passed."""
    out: list = []
    end = time.monotonic() + DEADLINE_S
    while len(out) < n and time.monotonic() < end:
        got = fetch()
        out += got
        if not got:
            time.sleep(0.001)
    return out


def until(done, step) -> None:
    end = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < end, "timed out"
        step()
        time.sleep(0.002)


def linear(fill: float) -> torch.nn.Linear:
    module = torch.nn.Linear(3, 2)
    torch.nn.init.constant_(module.weight, fill), torch.nn.init.constant_(module.bias, -fill)
    return module


# ------------------------------------------------------------------------------ transport


def test_many_senders_one_receiver_exactly_once_in_sender_order(world):
    """3 senders x 200 messages: each delivered once, headers and frames intact, per-sender order."""
    rx = world().receiver("q")
    senders = [world().sender("q") for _ in range(3)]
    for seq in range(200):
        for i, tx in enumerate(senders):
            tx.send((i, seq, -seq, 1 << 40), [np.array([i, seq], np.int64)])
    got = gather(rx.recv_all, 600)
    world.settle()
    assert rx.recv_all() == []
    assert len(got) == 600
    for i in range(3):
        mine = [m for m in got if m.header[0] == i]
        assert [m.header for m in mine] == [(i, q, -q, 1 << 40) for q in range(200)]
        assert all(np.frombuffer(m.frames[0], np.int64).tolist() == [i, m.header[1]] for m in mine)


def test_frames_round_trip_byte_exact(world):
    """bytes, memoryviews and arrays of several dtypes (and a 4 MB frame) arrive bit for bit."""
    rx, tx = world().receiver("q"), world().sender("q")
    rng = np.random.default_rng(0)
    frames = [b"", b"abc", memoryview(b"view"), np.arange(7, dtype=np.float64) / 3, rng.random((5, 3)) > 0.5]
    frames.append(rng.integers(0, 256, 4 << 20, dtype=np.uint8))  # 4 MiB
    tx.send((7, -1), frames)
    (message,) = gather(rx.recv_all, 1)
    assert message.header == (7, -1)
    assert [bytes(f) for f in message.frames] == [bytes(memoryview(f).cast("B")) for f in frames]


def test_recv_all_respects_the_limit_and_never_blocks(world):
    """recv_all(3) takes the 3 oldest and leaves the rest; an empty receiver gives [] at once."""
    rx, tx = world().receiver("q"), world().sender("q")
    started = time.monotonic()
    assert rx.recv_all() == [] and rx.recv_all(5) == []
    assert time.monotonic() - started < 0.5
    for i in range(10):
        tx.send((i,))
    world.settle()
    assert [m.header for m in rx.recv_all(3)] == [(0,), (1,), (2,)]
    assert [m.header for m in rx.recv_all()] == [(i,) for i in range(3, 10)]
    assert rx.recv_all() == []


def test_publisher_reaches_every_subscriber(world):
    """A broadcast reaches both subscribers once each.

    PUB/SUB (local) silently drops messages for a subscriber whose connection and subscription
    have not reached the publisher yet, so we resend a warm-up message until both got one (the
    reason the params stream retries WANT and the controller re-sends STOP)."""
    pub = world().publisher("bus")
    subs = [world().subscriber("bus") for _ in range(2)]
    got: list[list[Message]] = [[], []]

    def pump(send: bool) -> None:
        if send:
            pub.send((0,))
        for inbox, sub in zip(got, subs):
            inbox += sub.recv_all()

    until(lambda: all(got), lambda: pump(send=True))
    pub.send((1, 9), [b"payload"])
    until(lambda: all(any(m.header[0] == 1 for m in inbox) for inbox in got), lambda: pump(send=False))
    world.settle()
    pump(send=False)
    for inbox in got:
        finals = [(m.header, [bytes(f) for f in m.frames]) for m in inbox if m.header[0] == 1]
        assert finals == [((1, 9), [b"payload"])]


def test_arrays_are_shared_between_endpoints(sharing_world):
    """Writes through one endpoint's views are seen by another's (shared memory for local)."""
    world = sharing_world
    assert world().shares_memory
    specs = {"x": ((4, 3), np.float32), "n": ((5,), np.int64), "b": ((2,), np.bool_)}
    layout = Layout({name: ArraySpec(*spec) for name, spec in specs.items()})
    world.declare("blk", layout)
    a, b = world().arrays("blk", layout), world().arrays("blk", layout)
    a["x"][:] = np.arange(12).reshape(4, 3)
    a["n"][2] = -7
    a["b"][1] = True
    assert b["x"].tolist() == np.arange(12).reshape(4, 3).tolist()
    assert b["n"].tolist() == [0, 0, -7, 0, 0] and b["b"].tolist() == [False, True]
    b["x"][0, 0] = 42
    assert a["x"][0, 0] == 42


def test_wait_returns_by_its_timeout_and_when_a_message_arrives(world):
    """Bounds only (no speed claim); inline's wait returns at once by design (one process)."""
    transport = world()
    rx, tx = transport.receiver("w"), world().sender("w")
    started = time.monotonic()
    transport.wait([rx], 0.3)
    idle = time.monotonic() - started
    assert idle < 1.3
    if world.kind != "inline":
        assert idle >= 0.25, "local wait should block, not spin"
    timer = threading.Timer(0.2, lambda: tx.send((5,)))
    started = time.monotonic()
    timer.start()
    transport.wait([rx], 10.0)
    woke = time.monotonic() - started
    timer.join()
    assert woke < 5.0, "a message should end the wait long before its 10 s timeout"
    assert [m.header for m in gather(rx.recv_all, 1)] == [(5,)]


@pytest.mark.parametrize("raw", [b"", b"\0" * 7, b"\0" * 12, b"\0" * 8 * 65])
def test_decode_header_rejects_malformed_headers(raw):
    """Empty, not a multiple of 8 bytes, or longer than 64 int64s."""
    with pytest.raises(ValueError, match="malformed"):
        decode_header(raw)


def test_header_round_trip_up_to_64_values():
    header = tuple(range(-(2**62), 2**62, 2**57))
    assert len(header) == 64 and decode_header(encode_header(header)) == header


# ------------------------------------------------------------------------------ streams


def test_inference_replies_reach_only_the_asking_actor(world):
    """2 actors x 2 splits: the server polls all 4 requests; each actor sees exactly its splits."""
    server = InferenceServer(world(), 0, actors=[0, 1])
    clients = [InferenceClient(world(), a, 0) for a in (0, 1)]
    for client in clients:
        client.request(0)
        client.request(1, min_version=3, key=7)
    requests = gather(lambda: server.poll(limit=4), 4)
    assert sorted((r.actor, r.split, r.min_version, r.key) for r in requests) == [
        (0, 0, 0, 0), (0, 1, 3, 7), (1, 0, 0, 0), (1, 1, 3, 7)
    ]  # fmt: skip
    server.reply([r for r in requests if r.actor == 0])
    assert sorted(gather(clients[0].ready, 2)) == [0, 1]
    world.settle()
    assert clients[1].ready() == []
    server.reply([r for r in requests if r.actor == 1])
    assert sorted(gather(clients[1].ready, 2)) == [0, 1]
    world.settle()
    assert clients[0].ready() == [] and clients[1].ready() == [] and server.poll(limit=4) == []


def slot_layout(rows: int = 3) -> Layout:
    return Layout({
        "obs": ArraySpec((rows, 4), np.dtype(np.float32)),
        "action": ArraySpec((rows,), np.dtype(np.int64)),
        "value": ArraySpec((rows,), np.dtype(np.float32)),
        "version": ArraySpec((1,), np.dtype(np.int64)),
    })  # fmt: skip


def test_inference_slot_contents_reach_the_other_side(world):
    """The policy worker reads the observations the actor wrote, and the actor reads the actions,
    outputs and version the policy wrote: in shared memory, or carried by the messages (tcp)."""
    layout = slot_layout()
    world.declare("actor0", layout)
    mine, theirs = world().arrays("actor0", layout), world().arrays("actor0", layout)
    client = InferenceClient(world(), 0, 0, slots=[mine])
    server = InferenceServer(world(), 0, actors=[0], slots={(0, 0): theirs})
    mine["obs"][:] = np.arange(12, dtype=np.float32).reshape(3, 4)
    client.request(0)
    mine["obs"][:] = -1  # after the request: a socket backend must have sent its own copy
    (request,) = gather(lambda: server.poll(limit=1), 1)
    if not world().shares_memory:
        assert theirs["obs"].tolist() == np.arange(12).reshape(3, 4).tolist()
    theirs["action"][:], theirs["value"][:], theirs["version"][:] = [7, 8, 9], [0.5, 1.5, 2.5], 4
    server.reply([request])
    assert gather(client.ready, 1) == [0]
    assert mine["action"].tolist() == [7, 8, 9] and mine["value"].tolist() == [0.5, 1.5, 2.5]
    assert mine["version"].tolist() == [4]


def test_sample_slots_back_pressure_and_release(world):
    """acquire until None, send, the trainer sees the data in place, releases one slot, and only
    that slot is handed out again: a held slot is never given twice."""
    slots = [(s, k) for s in range(2) for k in range(2)]  # (split, slot)
    layout = Layout({f"sample.{s}.{k}.obs": ArraySpec((3, 2), np.float32) for s, k in slots})
    world.declare("actor0", layout)
    mine, theirs = world().arrays("actor0", layout), world().arrays("actor0", layout)
    producer = SampleProducer(world(), 0, {(s, k): sub_arrays(mine, f"sample.{s}.{k}.") for s, k in slots})
    consumer = SampleConsumer(world(), {(0, s, k): sub_arrays(theirs, f"sample.{s}.{k}.") for s, k in slots})
    held = [producer.acquire(0), producer.acquire(0)]
    assert sorted(held) == [0, 1] and producer.acquire(0) is None
    for slot in held:
        producer.slots[(0, slot)]["obs"][:] = 10 + slot
        producer.send(0, slot)
    refs = gather(lambda: consumer.poll(limit=8), 2)
    assert [(r.actor, r.split, r.slot) for r in refs] == [(0, 0, held[0]), (0, 0, held[1])]
    assert all((consumer.segment(r)["obs"] == 10 + r.slot).all() for r in refs)
    assert producer.acquire(0) is None
    consumer.release(refs[1])
    assert gather(lambda: [s for s in [producer.acquire(0)] if s is not None], 1) == [held[1]]
    world.settle()
    assert producer.acquire(0) is None, "a slot still held by the trainer was handed out"
    assert producer.acquire(1) is not None, "splits have their own slots"


def test_params_late_joiner_and_monotonic_versions(world):
    """A subscriber that joins after a publish gets it via WANT; versions never go backwards;
    a message with the wrong tensors is dropped and counted, never loaded."""
    service_transport = world()
    service = ParamServiceKernel(service_transport, tensor_bytes(linear(0.0)))
    publisher = ParamPublisher(world())
    publisher.publish(1, linear(1.0))
    until(lambda: service.version == 1, service.poll)
    mine, subscriber_transport = linear(0.0), world()
    subscriber = ParamSubscriber(subscriber_transport, mine)
    seen: list[int] = []

    def pump() -> None:
        subscriber.poll(mine)
        service.poll()
        seen.append(subscriber.version)

    until(lambda: subscriber.version == 1, pump)
    assert mine.weight.eq(1.0).all() and mine.bias.eq(-1.0).all()
    publisher.publish(3, linear(3.0))
    # another sender's older version, after 3: the service keeps 3 (one sender's queue keeps only
    # its last message, which for a trainer is its newest: srl.streams.queues.NEWEST_ONLY)
    ParamPublisher(world()).publish(2, linear(2.0))
    until(lambda: subscriber.version == 3, pump)
    for _ in range(20):
        pump()
    assert seen == sorted(seen) and seen[-1] == 3 and mine.weight.eq(3.0).all()
    service_transport.publisher(SERVICE_OUT).send((2, 0), state_frames(linear(2.0)))  # an older version
    world.settle()
    assert not subscriber.poll(mine) and subscriber.version == 3 and mine.weight.eq(3.0).all()

    frames = state_frames(linear(5.0))
    with pytest.raises(ValueError, match="tensors"):
        load_frames(mine, frames[:1])
    with pytest.raises(ValueError, match="values"):
        load_frames(mine, [frames[0][:1], frames[1]])
    subscriber_transport.take_rejected()
    service_transport.publisher(SERVICE_OUT).send((9, 0), frames[:1])
    rejected: list[dict] = []
    until(lambda: bool(rejected), lambda: (subscriber.poll(mine), rejected.extend(filter(None, [
        subscriber_transport.take_rejected()]))))
    assert rejected == [{SERVICE_OUT: 1}]
    assert subscriber.version == 3 and mine.weight.eq(3.0).all()


def test_control_reports_and_stop_broadcast(world):
    """Reports decode to (kind, role, index, payload); STOP (re-sent, as the controller does,
    since PUB/SUB drops it for a not-yet-connected subscriber) reaches every worker and sticks."""
    controller = world()
    inbox, stopper = controller.receiver(CONTROLLER_IN), controller.publisher(CONTROL_OUT)
    links = [WorkerLink(world(), Role.ACTOR, 3), WorkerLink(world(), Role.TRAINER, 0)]
    links[0].send(Kind.REPORT, {"env_steps": 12, "episode_returns": [1.5]})
    links[1].send(Kind.FINAL, {"params_sha256": "ab"})
    reports = {r[1]: r for r in map(decode_report, gather(inbox.recv_all, 2))}
    assert reports == {
        Role.ACTOR: (Kind.REPORT, Role.ACTOR, 3, {"env_steps": 12, "episode_returns": [1.5]}),
        Role.TRAINER: (Kind.FINAL, Role.TRAINER, 0, {"params_sha256": "ab"}),
    }
    assert not any(link.poll_stop() for link in links)

    def pump() -> None:
        stopper.send((STOP,))
        for link in links:
            link.poll_stop()

    until(lambda: all(link.stopping for link in links), pump)
    assert all(link.poll_stop() for link in links)
    with pytest.raises(ValueError, match="JSON object"):
        decode_report(Message((1, 0, 0), [b"[1, 2]"]))


# ------------------------------------------------------------------------------ frames are values


@pytest.mark.parametrize("world", KINDS, indirect=True)
def test_a_published_version_is_a_snapshot_of_the_weights(world):
    """Weights change in place after a publish (the next optimizer step); the version must still
    carry the weights it had when published. Made deterministic by publishing before the
    service is up (it restarts, or is slow to start), so the message waits in the sender's queue."""
    publisher = ParamPublisher(world())
    module = torch.nn.Linear(1024, 1024)  # a 4 MiB weight
    snapshot = [f.copy() for f in state_frames(module)]
    publisher.publish(1, module)
    with torch.no_grad():
        module.weight.add_(1.0)
    service = ParamServiceKernel(world(), tensor_bytes(module))
    until(lambda: service.version == 1, service.poll)
    assert [bytes(f) == s.tobytes() for f, s in zip(service.latest.frames, snapshot)] == [True, True]


@pytest.mark.parametrize("world", KINDS, indirect=True)
def test_non_contiguous_array_frames_are_sent_as_their_values(world):
    """Any numpy array is a valid frame (Sender.send's signature); it arrives as its C-order bytes."""
    rx, tx = world().receiver("q"), world().sender("q")
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    tx.send((1,), [a[:, ::2], a.T])
    (message,) = gather(rx.recv_all, 1)
    assert [bytes(f) for f in message.frames] == [a[:, ::2].tobytes(), a.T.tobytes()]  # tobytes: C order
