"""Recorded messages sent again are refused and counted: by a receiver (1,000 copies of signed
messages captured on the wire), and in a whole run over tcp, whose reports and segments an
attacker on the network records and replays without the secret: the run's counts stay true,
no transition is trained on twice, and summary.json counts what was dropped."""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import threading
import time

import pytest
import zmq
from test_tcp import gather, make_wire

from srl.launch import local as local_launcher
from srl.streams import tcp as tcp_module
from srl.streams.control import CONTROLLER_IN
from srl.streams.tcp import TcpTransport
from srl.streams.wire import Freshness, Sealed, Sealer, WireError, decode, encode

SECRET = b"s" * 32


def sealed(sender: Sealer, header=(1,), age_s: float = 0.0):
    parts = encode(SECRET, "q", header, [b"x"], sender.next())
    message = decode(SECRET, "q", [bytes(p) for p in parts], make_wire("q").limits)
    return Sealed(message.message, message.sender_id, message.seq, message.sent_ns - int(age_s * 1e9))


def test_freshness_takes_each_senders_messages_once_in_rising_order():
    fresh, a, b = Freshness(max_age_s=60), Sealer(), Sealer()
    first, second, other = sealed(a), sealed(a), sealed(b)
    fresh.check(first)
    fresh.check(second)
    fresh.check(other)  # another sender (a restarted worker draws a new id) starts at 1
    for copy in (first, second, other):
        with pytest.raises(WireError, match="replayed or duplicated"):
            fresh.check(copy)
    with pytest.raises(WireError, match="ago, outside the 60 s window"):
        fresh.check(sealed(Sealer(), age_s=61))
    with pytest.raises(WireError, match="outside"):
        fresh.check(sealed(Sealer(), age_s=-61))  # from the future: a clock far off, or forged


def test_freshness_forgets_senders_whose_messages_are_too_old_anyway():
    fresh, sender = Freshness(max_age_s=1), Sealer()
    message = sealed(sender)
    fresh.check(message, now_ns=message.sent_ns)
    later = message.sent_ns + int(5e9)
    fresh._prune(later)
    assert fresh.last_seq == {}
    with pytest.raises(WireError, match="outside"):  # forgotten, and still refused: too old
        fresh.check(message, now_ns=later)


def test_a_restarted_receiver_refuses_what_was_sent_before_its_restart():
    """It knows no sender's sequence, so this is what stops recorded messages of any sender."""
    sender = Sealer()
    before = sealed(sender)
    restarted_ns = before.sent_ns + 1
    fresh = Freshness(max_age_s=60, not_before_ns=restarted_ns)
    with pytest.raises(WireError, match="before this receiver's restart"):
        fresh.check(before, now_ns=restarted_ns + 10)
    after = sealed(sender)  # the same sender goes on after the restart: taken
    fresh.check(Sealed(after.message, after.sender_id, after.seq, restarted_ns + 5), now_ns=restarted_ns + 10)


def test_a_restarted_workers_transport_refuses_recorded_messages_and_counts_them():
    wire = make_wire("q")
    peer, attacker, owner = TcpTransport(wire), zmq.Context(), None
    try:
        tx = peer.sender("q")
        tx.socket = Tap(tx.socket)
        tx.send((1,), [b"meant for the dead receiver"])
        time.sleep(0.01)
        owner = TcpTransport(wire, restarted_ns=time.time_ns())
        rx = owner.receiver("q")
        push = attacker.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.connect(wire.connect_address("q"))
        push.send(tx.socket.captured[0])
        tx.send((2,), [b"after the restart"])
        assert [m.header for m in gather(rx, 1)] == [(2,)]
        end = time.monotonic() + 5
        while rx.rejected < 2 and time.monotonic() < end:
            rx.recv_all()
            time.sleep(0.005)
        # the message queued for the dead receiver, and the attacker's copy of it
        assert owner.take_rejected() == {"q": 2}
    finally:
        attacker.destroy(linger=0)
        peer.close()
        if owner is not None:
            owner.close()


class Tap:
    """A sender's socket that also records the bytes it puts on the wire (what a sniffer sees)."""

    def __init__(self, socket: zmq.Socket) -> None:
        self.socket, self.captured = socket, []

    def send(self, data, *args, **kwargs):
        self.captured.append(bytes(data))
        return self.socket.send(data, *args, **kwargs)


def test_a_thousand_copies_of_captured_messages_are_refused_and_counted():
    wire = make_wire("q")
    owner, peer = TcpTransport(wire), TcpTransport(wire)
    attacker = zmq.Context()
    try:
        rx, tx = owner.receiver("q"), peer.sender("q")
        tx.socket = Tap(tx.socket)
        for i in range(5):
            tx.send((i,), [b"payload %d" % i])
        assert [m.header for m in gather(rx, 5)] == [(i,) for i in range(5)]
        push = attacker.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 1000)
        push.connect(wire.connect_address("q"))
        for _ in range(200):
            for data in tx.socket.captured:
                push.send(data)
        end = time.monotonic() + 10
        while rx.rejected < 1000 and time.monotonic() < end:
            assert rx.recv_all() == []
            time.sleep(0.005)
        assert rx.rejected == 1000
        assert owner.take_rejected() == {"q": 1000} and owner.take_rejected() == {}
        tx.send((9,), [b"fresh"])  # the real sender goes on
        assert [m.header for m in gather(rx, 1)] == [(9,)]
    finally:
        attacker.destroy(linger=0)
        owner.close()
        peer.close()


def test_a_run_over_tcp_refuses_replayed_reports_and_segments(run_dir, monkeypatch):
    """Every worker's sends to the controller and to the trainer are recorded (the tap is
    inherited by the forked workers); an attacker without the secret replays them while the run
    goes on. The run's env_steps are the actors' own, each transition is trained on once, and
    summary.json counts the replays it dropped."""
    from recording import load_batches
    from test_pipeline import EPISODE_LENGTH, counting_config

    from srl.launch.run import run_experiment
    from srl.testing import check_counts

    captured = mp.get_context("fork").SimpleQueue()
    send = tcp_module._SignedSender.send
    taken = {"count": 0}  # per process (forked): a few dozen each, so the queue's pipe never fills

    def tapped(self, header, frames=()):
        if (self.name == CONTROLLER_IN or "samples" in self.name) and taken["count"] < 40:
            taken["count"] += 1
            real = self.socket.send
            self.socket.send = lambda data, *a, **k: (captured.put((self.name, bytes(data))), real(data, *a, **k))[1]
            try:
                return send(self, header, frames)
            finally:
                self.socket.send = real
        return send(self, header, frames)

    monkeypatch.setattr(tcp_module._SignedSender, "send", tapped)
    stop, replayed = threading.Event(), []
    make = local_launcher._tcp_wire

    def wire_and_attack(graph):
        wire = make(graph)
        threading.Thread(target=_replay, args=(wire, captured, stop, replayed), daemon=True).start()
        return wire

    monkeypatch.setattr(local_launcher, "_tcp_wire", wire_and_attack)
    try:
        config = counting_config("local", run_dir, transport="tcp", total_env_steps=6000)
        assert run_experiment(config) == 0
    finally:
        stop.set()
    summary = json.loads((run_dir / "summary.json").read_text())
    batches = load_batches(run_dir / "batches")
    totals = check_counts([b["obs"] for b in batches], [b["terminated"] for b in batches], EPISODE_LENGTH)
    assert len(replayed) >= 1000, len(replayed)
    assert summary["rejected_messages"] >= 1000, summary  # received before the run ended: all refused
    assert summary["rejected_messages"] <= len(replayed), (summary, len(replayed))
    assert set(summary["rejected_messages_by_stream"]) >= {CONTROLLER_IN}, summary
    # the reports' env steps are the actors' own: each of the 1,000 replayed reports would have
    # added its hundreds of steps again (and a replayed segment failed check_counts above)
    assert summary["env_steps"] <= 2 * totals["transitions"], (summary, totals)


def _replay(wire, captured, stop: threading.Event, replayed: list) -> None:
    context = zmq.Context()
    pushes: dict[str, zmq.Socket] = {}
    seen: list[tuple[str, bytes]] = []
    try:
        while not stop.is_set():
            while not captured.empty() and len(seen) < 200:
                seen.append(captured.get())
            for name, data in seen:
                if name not in pushes:
                    pushes[name] = context.socket(zmq.PUSH)
                    pushes[name].setsockopt(zmq.LINGER, 0)
                    pushes[name].connect(wire.connect_address(name))
                try:
                    pushes[name].send(data, zmq.NOBLOCK)
                    replayed.append(name)
                except zmq.Again:
                    pass
            stop.wait(0.02)
    except queue.Empty:
        pass
    finally:
        context.destroy(linger=0)
