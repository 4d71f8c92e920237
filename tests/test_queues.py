"""Bounded queues: a peer that never reads holds at most a byte budget of a sender's memory.

Each socket queues the budget over its stream's largest message, at least one; a send that finds
its queue full too long is dropped and counted, a receiver counts what a sender's sequence skipped,
and the messages a run's slots put in flight must fit before it starts. In whole runs, a stranger
subscribed to the parameter stream (and to the control stream, srl's other publisher) that never
reads, and a parameter service that stops reading (SIGSTOP: the trainer publishes into its queue),
leave the senders' memory within a bound while the run trains on and exits 0. Before the bounds,
the parameter service grew 661 MiB in 12 s on shm, and the trainer 272 MiB in 8 s on tcp."""

from __future__ import annotations

import dataclasses
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
import zmq
from test_declared_streams import EXTRA
from test_tcp import gather, make_wire

from srl.config import ConfigError
from srl.config.load import load_config
from srl.graph import build_graph
from srl.launch import local as local_launcher
from srl.launch.run import run_experiment
from srl.streams import queues
from srl.streams.framing import pack
from srl.streams.local import HEADER_MESSAGE_BYTES, LocalTransport
from srl.streams.queues import messages_within
from srl.streams.tcp import TcpTransport
from srl.streams.tcp_setup import check_queues
from srl.streams.wire import Sealer, WireError, encode

MIB = 1 << 20
# two hidden layers of 512 for both heads: a parameter message of about 2.1 MiB, and updates
# small enough to publish a few a second
WIDE = ["policy_kwargs.hidden_sizes=[512,512]", "dataflow.envs_per_actor=4", "dataflow.sample_length=16", "algo.epochs=1",
        "algo.num_minibatches=1"]
WARM_UP_S, WATCH_S, STOPPED_S = 4.0, 12.0, 8.0
# a queue that held every message a peer did not take grows by a parameter message per update
# (dozens in WATCH_S); a bounded one by a few at most
GROWTH_BOUND_MIB = 48


def test_a_queue_holds_the_budget_over_the_largest_message_and_at_least_one():
    assert messages_within(64 * MIB, MIB) == 64
    assert messages_within(64 * MIB, 3 * MIB) == 21  # rounded down: never past the budget
    assert messages_within(64 * MIB, 100) == 671088
    assert messages_within(64 * MIB, 65 * MIB) == 1  # one message larger than the budget still goes
    assert messages_within(64 * MIB, 0) == 64 * MIB


def options(socket: zmq.Socket) -> dict:
    names = ("SNDHWM", "RCVHWM", "CONFLATE", "MAXMSGSIZE", "SNDBUF", "RCVBUF", "SNDTIMEO")
    return {n: socket.getsockopt(getattr(zmq, n)) for n in names}


def test_tcp_sockets_queue_the_budget_over_their_stream_s_largest_message(monkeypatch):
    names = ("q", "params.in", "params.out")
    sizes = {"q": 3 * MIB, "params.in": 5 * MIB, "params.out": 5 * MIB}
    wire = dataclasses.replace(make_wire(*names), max_queued_bytes=32 * MIB, message_bytes=sizes)
    transport = TcpTransport(wire)
    try:
        receiver, sender = options(transport.receiver("q").socket), options(transport.sender("q").socket)
        assert receiver["RCVHWM"] == sender["SNDHWM"] == 10 and receiver["MAXMSGSIZE"] == 3 * MIB
        assert receiver["RCVBUF"] == sender["SNDBUF"] == 4 * MIB  # the kernel's buffers: at most 4 MiB
        assert sender["SNDTIMEO"] == 1000 and not sender["CONFLATE"]
        # parameters: the sending sockets keep the newest message; the receiving ones the budget's count
        # (libzmq aborts a conflating socket that receives a stranger's multipart message)
        assert options(transport.publisher("params.out").socket)["CONFLATE"] == 1
        assert options(transport.sender("params.in").socket)["CONFLATE"] == 1
        for socket in (transport.receiver("params.in").socket, transport.subscriber("params.out").socket):
            assert options(socket)["CONFLATE"] == 0 and options(socket)["RCVHWM"] == 6
    finally:
        transport.close()


def test_shm_sockets_queue_the_budget_in_headers_reports_and_the_newest_parameters(tmp_path):
    """Sized by the graph's messages: a slot stream's are headers on shm, a tap's whole segments."""
    graph = build_graph(load_config("cartpole-ppo", EXTRA))
    sizes = graph.message_bytes(shares_memory=True)
    transport = LocalTransport("q", tmp_path, 16 * MIB, sizes)
    try:
        assert options(transport.receiver("trainer.samples").socket)["RCVHWM"] == 16 * MIB // HEADER_MESSAGE_BYTES
        assert options(transport.sender("controller.in").socket)["SNDHWM"] == 3  # reports of up to 4 MiB
        tap = options(transport.publisher("trainer.samples.tap").socket)["SNDHWM"]
        assert tap == 16 * MIB // sizes["trainer.samples.tap"] and 10 < tap < 16 * MIB // HEADER_MESSAGE_BYTES
        assert options(transport.publisher("params.out").socket)["CONFLATE"] == 1
        assert options(transport.subscriber("params.out").socket)["CONFLATE"] == 1
    finally:
        transport.close()


@pytest.mark.parametrize("backend", ["tcp", "shm"])
def test_a_send_to_a_receiver_that_never_reads_is_dropped_and_counted_not_blocked(backend, tmp_path, monkeypatch):
    """The queue fills (the budget, the kernel's buffers), then each send waits SEND_TIMEOUT_S and
    drops its message; the receiver later takes what was queued, in order, and counts no gap."""
    monkeypatch.setattr(queues, "SEND_TIMEOUT_S", 0.05)
    if backend == "tcp":
        wire = make_wire("q")
        wire = dataclasses.replace(wire, max_queued_bytes=2 * MIB, message_bytes={"q": MIB})
        owner, peer = TcpTransport(wire), TcpTransport(wire)
        payload = b"x" * (MIB - 4096)
    else:
        owner = peer = LocalTransport("q", tmp_path, max_queued_bytes=16 * MIB)
        payload = b""  # headers: the budget holds 32,000 of them
    try:
        rx, tx = owner.receiver("q"), peer.sender("q")
        sent = 0
        for _ in range(50):  # fill until a send drops; again after a pause, until the first send drops
            before = sent
            while not peer.take_dropped():
                tx.send((sent,), [payload] if payload else [])
                sent += 1
                assert sent < 100_000, "a receiver that never reads took 100,000 messages"
            sent -= 1  # the last one was dropped
            if sent == before:  # nothing more went through: every buffer on the way is full
                break
            time.sleep(0.3)  # ZeroMQ's I/O threads move what they can into the kernel's buffers
        for _ in range(3):
            tx.send((-1,), [payload] if payload else [])
        assert peer.take_dropped() == {"q": 3}
        got = gather(rx, sent)
        assert [m.header[0] for m in got] == list(range(sent))
        tx.send((sent,), [payload] if payload else [])  # the queue drained: sends go through again
        assert [m.header for m in gather(rx, 1)] == [(sent,)]
        assert owner.take_dropped() == {}  # the sender counted its drops; the receiver saw no gap
    finally:
        owner.close()
        if peer is not owner:
            peer.close()


def test_a_receiver_counts_the_messages_a_sender_s_sequence_skipped():
    wire = make_wire("q", "params.in")
    transport, stranger = TcpTransport(wire), zmq.Context()
    try:
        push = {n: stranger.socket(zmq.PUSH) for n in ("q", "params.in")}
        for name, socket in push.items():
            socket.connect(wire.connect_address(name))
            sealer = Sealer()
            seals = [sealer.next() for _ in range(6)]
            for i in (0, 1, 4, 5):  # the third and fourth lost on the way
                socket.send(pack(encode(wire.secret, name, (i,), [], seals[i])))
        assert len(gather(transport.receiver("q"), 4)) == 4
        assert len(gather(transport.receiver("params.in"), 4)) == 4
        assert transport.take_dropped() == {"q": 2}  # parameters: older versions may be skipped
    finally:
        stranger.destroy(linger=0)
        transport.close()


def test_a_message_larger_than_its_stream_s_largest_is_refused_by_its_sender():
    wire = dataclasses.replace(make_wire("q"), message_bytes={"q": 1000})
    transport = TcpTransport(wire)
    try:
        with pytest.raises(WireError, match="larger than the 1000 its receivers take"):
            transport.sender("q").send((1,), [b"x" * 1000])
    finally:
        transport.close()


def test_segments_in_flight_past_the_budget_are_refused_before_launch():
    overrides = ["dataflow.transport=tcp", "dataflow.sample_length=10000", "dataflow.segment_slots=4", "dataflow.max_queued_bytes_per_peer=16777216"]
    with pytest.raises(ConfigError, match="field 'dataflow.max_queued_bytes_per_peer'.*'trainer.samples'.*up to 4 in flight"):
        check_queues(build_graph(load_config("cartpole-ppo", overrides)))
    check_queues(build_graph(load_config("cartpole-ppo", overrides[:-1] + ["dataflow.max_queued_bytes_per_peer=67108864"])))
    with pytest.raises(ConfigError, match="field 'dataflow.max_queued_bytes_per_peer'.*greater than or equal to 16777216"):
        load_config("cartpole-ppo", ["dataflow.max_queued_bytes_per_peer=1000"])


def wide_run(run_dir: Path, transport: str, seconds: float):
    return load_config("cartpole-ppo", [
        f"run.run_dir={run_dir}", "launch.launcher=local", f"dataflow.transport={transport}", *WIDE, "run.seed=1",
        f"stop.time_limit_s={seconds}", "stop.target_return=null", "stop.total_env_steps=100000000", "monitor.display=off",
        "monitor.learning_curve=false", "dataflow.max_policy_lag=1000000", "run.checkpoint_interval_s=1000",
    ])


def worker(role: str, timeout_s: float = 60.0) -> psutil.Process:
    """This test's srl worker of `role` (its process title is srl:<experiment>:<role>:<index>)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for child in psutil.Process().children(recursive=True):
            try:
                title = child.cmdline()[0]
            except (psutil.Error, IndexError):
                continue
            if title.startswith("srl:") and title.split(":")[2] == role:
                return child
        time.sleep(0.2)
    raise AssertionError(f"no {role} worker started")


def growth_mib(proc: psutil.Process, seconds: float) -> float:
    """How far `proc`'s resident memory rose above where it was at the start, over `seconds`."""
    start = peak = proc.memory_info().rss
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        peak = max(peak, proc.memory_info().rss)
        time.sleep(0.1)
    return (peak - start) / MIB


def silent_subscribers(context: zmq.Context, addresses: list[str]) -> list[zmq.Socket]:
    """Subscribe to every message at `addresses` and never read: what a stranger can do with no
    secret. Its own queue holds one message and its kernel little, so the publisher keeps the rest."""
    subs = []
    for address in addresses:
        sub = context.socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVHWM, 1)
        sub.setsockopt(zmq.RCVBUF, 1 << 16)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(address)
        subs.append(sub)
    return subs  # held by the caller: a socket collected as garbage is closed


def first_message(sub: zmq.Socket, timeout_s: float = 15.0) -> None:
    """Until the parameter service has sent `sub` its first message (unread): from then on it
    publishes as it will for the rest of the run. Measured from a fixed warm-up instead, one CI
    run counted 114 MiB of growth where 3 MiB is usual on a quiet machine; most likely the service
    was still starting (its imports alone are about that), which its first message rules out."""
    sub.poll(int(timeout_s * 1000))


def run_beside(attack, config, context: zmq.Context) -> None:
    """The run, to its end (exit 0), with `attack` in a thread beside it; then the attacker's sockets go."""
    thread = threading.Thread(target=attack, daemon=True)
    thread.start()
    try:
        assert run_experiment(config) == 0
    finally:
        thread.join(timeout=60)
        context.destroy(linger=0)


def test_silent_subscribers_and_a_stopped_parameter_service_hold_a_bounded_memory_over_tcp(run_dir, monkeypatch):
    found: dict = {}
    make = local_launcher._tcp_wire
    monkeypatch.setattr(local_launcher, "_tcp_wire", lambda graph: found.setdefault("wire", make(graph)))
    measured: dict = {}
    context = zmq.Context()

    def attack() -> None:
        params = worker("params")
        trainer = worker("trainer")
        time.sleep(WARM_UP_S)
        wire = found["wire"]
        subs = silent_subscribers(context, [wire.connect_address(n) for n in ("params.out", "control.out")])
        first_message(subs[0])
        measured["params"] = growth_mib(params, WATCH_S)
        # the trainer publishes every update to a service that takes nothing
        params.send_signal(signal.SIGSTOP)
        try:
            measured["trainer"] = growth_mib(trainer, STOPPED_S)
        finally:
            params.send_signal(signal.SIGCONT)
        measured["subscribed"] = bool(subs[0].poll(0))  # it was sent parameters: it did subscribe

    run_beside(attack, wide_run(run_dir, "tcp", seconds=40), context)
    assert measured.get("subscribed"), f"the run ended before the watch did, or no parameters came: {measured}"
    assert measured["params"] < GROWTH_BOUND_MIB, measured
    assert measured["trainer"] < GROWTH_BOUND_MIB, measured


def test_a_silent_subscriber_holds_a_bounded_memory_of_the_parameter_service_over_shm(run_dir, monkeypatch):
    found: dict = {}
    make = local_launcher.make_ipc_dir
    monkeypatch.setattr(local_launcher, "make_ipc_dir", lambda run_id: found.setdefault("dir", make(run_id)))
    measured: dict = {}
    context = zmq.Context()

    def attack() -> None:
        params = worker("params")
        time.sleep(WARM_UP_S)
        subs = silent_subscribers(context, [f"ipc://{found['dir'] / 'params.out'}"])
        first_message(subs[0])
        measured["params"] = growth_mib(params, WATCH_S)
        measured["subscribed"] = bool(subs[0].poll(0))  # it was sent parameters: it did subscribe

    run_beside(attack, wide_run(run_dir, "shm", seconds=30), context)
    assert measured.get("subscribed"), f"the run ended before the watch did, or no parameters came: {measured}"
    assert measured["params"] < GROWTH_BOUND_MIB, measured
