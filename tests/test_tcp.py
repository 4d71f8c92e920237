"""The tcp backend between real processes, and against strangers: a port of a run receives
garbage, unsigned and wrongly signed messages, and oversized frames; none is delivered, each
is counted, the receiver keeps working, and a whole run over tcp still loses no sample."""

from __future__ import annotations

import multiprocessing as mp
import secrets
import socket
import threading
import time

import numpy as np
import pytest
import zmq

from srl.launch import local as local_launcher
from srl.streams.framing import pack
from srl.streams.tcp import TcpTransport, Wire
from srl.streams.tcp_setup import free_ports
from srl.streams.wire import Limits, encode

DEADLINE_S = 10.0


def make_wire(*names: str, secret: bytes | None = None, **limits) -> Wire:
    ports = dict(zip(names, free_ports("127.0.0.1", len(names))))
    return Wire(secret or secrets.token_bytes(32), ports, limits=Limits(**limits))


def _echo(wire: Wire, count: int) -> None:
    """Child process: send back each message it receives, header reversed."""
    transport = TcpTransport(wire)
    rx, tx = transport.receiver("to_child"), transport.sender("to_parent")
    deadline = time.monotonic() + DEADLINE_S
    while count and time.monotonic() < deadline:
        transport.wait([rx], 0.1)
        for message in rx.recv_all():
            tx.send(message.header[::-1], message.frames)
            count -= 1
    time.sleep(0.5)  # linger=0: give the last replies time to leave
    transport.close()


def gather(receiver, n: int) -> list:
    out: list = []
    end = time.monotonic() + DEADLINE_S
    while len(out) < n and time.monotonic() < end:
        out += receiver.recv_all()
        time.sleep(0.002)
    return out


def test_tcp_between_processes():
    """40 messages (up to 1 MiB frames) to a child process and back, byte exact and in order;
    interleaved messages signed with another secret never reach the child."""
    wire = make_wire("to_child", "to_parent")
    child = mp.get_context("fork").Process(target=_echo, args=(wire, 40))
    child.start()
    transport = TcpTransport(wire)
    stranger = TcpTransport(Wire(b"x" * 32, wire.ports))
    try:
        rx, tx, bad = (
            transport.receiver("to_parent"),
            transport.sender("to_child"),
            stranger.sender("to_child"),
        )
        rng = np.random.default_rng(0)
        sent = []
        for i in range(40):
            frames = [
                rng.integers(0, 256, int(rng.integers(0, 1 << (i % 21))), dtype=np.uint8).tobytes(),
                b"ab",
            ]
            sent.append(((i, -i, 1 << 62), frames))
            tx.send(*sent[-1])
            bad.send((999,), [b"forged"])
        got = gather(rx, 40)
        assert [(m.header, [bytes(f) for f in m.frames]) for m in got] == [(h[::-1], f) for h, f in sent]
        child.join(DEADLINE_S)
        assert child.exitcode == 0
        assert rx.recv_all() == [], "the child echoed a message that was not signed with the secret"
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        transport.close()
        stranger.close()


def _raw_junk(port: int, payload: bytes) -> None:
    """A stranger that does not speak ZMTP: connects, writes bytes, leaves."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as raw:
            raw.sendall(payload)
    except OSError:
        pass  # the receiver may close on us: that is its right


def test_receiver_survives_garbage_on_its_port():
    wire = make_wire("q", max_frames=4, max_frame_bytes=1 << 16)
    transport, stranger = TcpTransport(wire), zmq.Context()
    try:
        rx = transport.receiver("q")
        _raw_junk(wire.port("q"), secrets.token_bytes(4096))
        _raw_junk(
            wire.port("q"), b"\xff" + b"\0" * 8 + b"\x7f" + secrets.token_bytes(100)
        )  # a ZMTP-like greeting
        push = stranger.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.connect(wire.connect_address("q"))
        junk = [
            [b"hello"],  # too few parts
            [secrets.token_bytes(32), np.int64(1).tobytes()],  # right shape, no secret
            [pack(encode(b"x" * 32, "q", (1,), [b"frame"]))],  # another run's secret
            [pack(encode(wire.secret, "other", (1,), [b"frame"]))],  # this run's secret, another stream
            [pack(encode(wire.secret, "q", (1,), [b""] * 5))],  # too many frames
            [b"x"] * 10_000,  # many parts: srl sends one frame per message; read to the end, refused
        ]  # a frame over the limit comes last, below: zmq drops the sender's connection for it
        for parts in junk:
            push.send_multipart(parts)
        end = time.monotonic() + DEADLINE_S
        while rx.rejected < 6 and time.monotonic() < end:
            assert rx.recv_all() == [], "garbage was delivered"
            time.sleep(0.01)
        # >= 6: the raw greeting above is a valid ZMTP 1.0 one, so zmq may frame its random tail too
        assert rx.rejected >= 6, rx.rejected
        # a frame over MAXMSGSIZE: zmq drops that peer's connection before buffering it
        push.send(pack(encode(wire.secret, "q", (2,), [b"x" * (1 << 20)])))
        time.sleep(0.3)
        friend = transport.sender("q")
        friend.send((42,), [b"fine"])
        (message,) = gather(rx, 1)
        assert message.header == (42,) and bytes(message.frames[0]) == b"fine"
        assert rx.recv_all() == [], "only the friend's message is delivered"
    finally:
        transport.close()
        stranger.destroy(linger=0)


def test_a_run_over_tcp_survives_garbage_on_every_port(run_dir, beside_the_wire):
    """The counting pipeline over tcp while a stranger sprays every stream's port: the run ends
    normally and every transition reaches the trainer exactly once."""
    from recording import load_batches
    from test_pipeline import EPISODE_LENGTH, counting_config

    from srl.launch.run import run_experiment
    from srl.testing import check_counts

    with beside_the_wire(_spray) as sprayers:
        assert run_experiment(counting_config("local", run_dir, transport="tcp", total_env_steps=3000)) == 0
    assert sprayers, "the run did not use the tcp wire"
    batches = load_batches(run_dir / "batches")
    totals = check_counts([b["obs"] for b in batches], [b["terminated"] for b in batches], EPISODE_LENGTH)
    assert totals["envs"] == 8 and totals["transitions"] >= 1500, totals


def _spray(wire: Wire, stop: threading.Event) -> None:
    context = zmq.Context()
    pushes = []
    for name in wire.ports:
        push = context.socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 0)
        push.setsockopt(zmq.SNDHWM, 100)
        push.connect(wire.connect_address(name))
        pushes.append((name, push))
    try:
        while not stop.is_set():
            for name, push in pushes:
                _raw_junk(wire.port(name), secrets.token_bytes(64))
                for parts in (
                    [secrets.token_bytes(32), np.int64(0).tobytes()],
                    encode(b"x" * 32, name, (0, 0, 0)),
                ):
                    try:
                        push.send_multipart(parts, zmq.NOBLOCK)
                    except zmq.Again:
                        pass
            stop.wait(0.01)
    finally:
        context.destroy(linger=0)


@pytest.mark.parametrize(
    "host,expected", [("127.0.0.1", "tcp://127.0.0.1:5"), ("0.0.0.0", "tcp://127.0.0.1:5")]
)
def test_wire_addresses(host, expected):
    wire = Wire(b"s" * 32, {"a": 5}, bind_host=host, hosts={})
    assert wire.connect_address("a") == expected
    assert wire.bind_address("a") == ("tcp://*:5" if host == "0.0.0.0" else "tcp://127.0.0.1:5")
    assert "s" * 32 not in repr(wire), "the secret must not appear in logs"
    with pytest.raises(KeyError, match="no tcp port"):
        wire.port("b")


def test_a_deterministic_run_over_tcp_computes_what_one_process_computes(tmp_path):
    """Bit-identical parameters from tcp (every slot byte through the wire, two policy workers,
    jittered timing) and from the one-process inline run: nothing is lost, reordered or altered."""
    from test_deterministic import params_hash

    workers = ["run.deterministic=true", "dataflow.inference=policy_worker", "launch.num_policy_workers=2", "dataflow.ring_splits=2"]
    over_tcp = params_hash(tmp_path / "tcp", *workers, "dataflow.transport=tcp")
    inline = params_hash(tmp_path / "inline", *workers, "launch.launcher=inline", jitter_s=0)
    assert over_tcp == inline


def test_a_worker_on_another_node_binds_its_streams_there():
    """launch.launcher=ray places each stream's port on its owner's node (srl.launch.ray_streams)."""
    from srl.launch.ray_streams import bind_host_on

    assert bind_host_on("10.0.0.7", "127.0.0.1") == "10.0.0.7"  # loopback is unreachable from other nodes
    assert bind_host_on("10.0.0.7", "0.0.0.0") == "0.0.0.0"


def test_replay_batches_and_priorities_cross_tcp():
    """Buffer and trainer ends of the batch stream, each with its own copy of the slots: a batch
    arrives whole, and only the priorities the trainer wrote come back."""
    from srl.api.policy import FieldSpec
    from srl.data import columns as C
    from srl.data.replay import batch_fields
    from srl.streams.batches import BATCHES_NAME, RELEASED_NAME, BatchClient, BatchServer

    fields = batch_fields(FieldSpec((3,), np.float32), FieldSpec((), np.int64))

    def new_slots():
        return [{n: np.zeros((4, *f.shape), f.dtype) for n, f in fields.items()} for _ in range(2)]

    wire = make_wire(BATCHES_NAME, RELEASED_NAME)
    buffer_side, trainer_side = TcpTransport(wire), TcpTransport(wire)
    try:
        server = BatchServer(buffer_side, new_slots())
        client = BatchClient(trainer_side, new_slots())
        slot = server.acquire()
        sent = server.slots[slot]
        for array in sent.values():
            array[:] = np.arange(array.size).reshape(array.shape) + 1
        server.send(slot, 77)
        got = _until(lambda: client.poll(limit=1))
        assert got == [(slot, 77)]
        for name in sent:
            if name != C.PRIORITY:
                np.testing.assert_array_equal(client.slots[slot][name], sent[name])
        assert not client.slots[slot][C.PRIORITY].any(), "priorities are the trainer's to write"
        client.slots[slot][C.PRIORITY][:] = [0.5, 1.5, 2.5, 3.5]
        client.slots[slot][C.INDEX][:] = -9  # the trainer's copy of other columns does not travel back
        client.release(slot)
        assert _until(server.released) == [slot]
        np.testing.assert_array_equal(sent[C.PRIORITY], [0.5, 1.5, 2.5, 3.5])
        np.testing.assert_array_equal(sent[C.INDEX], np.arange(4) + 1)
    finally:
        buffer_side.close()
        trainer_side.close()


def _until(poll):
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        out = poll()
        if out:
            return out
        time.sleep(0.01)
    raise AssertionError("nothing arrived over tcp")


def test_a_replay_run_over_tcp_trains(run_dir):
    """cartpole-dqn with dataflow.transport=tcp (refused before batches were carried): segments reach the
    buffer worker, batches the trainer, priorities the buffer, and the run ends normally. That
    no byte is lost or altered on the way is the test above's."""
    import json

    from srl.config.load import load_config
    from srl.launch.run import run_experiment

    overrides = ["dataflow.transport=tcp", "stop.total_env_steps=3000", "replay.warmup=500", "stop.target_return=null",
                 f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false"]
    assert run_experiment(load_config("cartpole-dqn", overrides)) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["updates"] > 50, summary
    assert summary["stop_reason"].startswith("total_env_steps"), summary


@pytest.mark.parametrize("listener", [["dataflow.transport=tcp"], ["launch.num_trainers=2", "launch.num_actor_workers=2"]],
                         ids=["streams", "trainers-rendezvous"])
def test_a_bind_host_that_is_no_address_of_this_machine_is_one_line_before_anything_is_made(run_dir, capsys, listener):
    """It was Errno 99 from the first bind, as a traceback, after the socket directory was made (and left)."""
    import os
    from pathlib import Path

    from srl import cli
    from srl.streams.local import IPC_PREFIX

    code = cli.main(["run", "cartpole-ppo", *listener, "dataflow.bind_host=8.8.8.8", f"run.run_dir={run_dir}", "monitor.display=off"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("srl: field 'dataflow.bind_host': 8.8.8.8 is no address of this machine"), err
    assert "127.0.0.1" in err and err.count("\n") == 1, "one line, with the machine's addresses"
    assert not run_dir.exists(), "nothing made: no run directory"
    assert list(Path(os.environ["SRL_IPC_DIR"]).glob(f"{IPC_PREFIX}{os.getpid()}-*")) == [], "no socket directory"


def test_a_wildcard_bind_host_is_said_in_one_line_with_what_guards_the_streams(capsys):
    from srl.config.load import load_config
    from srl.graph import build_graph
    from srl.graph.machine import check_machine

    check_machine(build_graph(load_config("cartpole-ppo", ["dataflow.transport=tcp"])))
    assert capsys.readouterr().err == "", "loopback: nothing to say"
    check_machine(build_graph(load_config("cartpole-ppo", ["dataflow.transport=tcp", "dataflow.bind_host=0.0.0.0"])))
    err = capsys.readouterr().err
    assert err.startswith("srl: warning: dataflow.bind_host=0.0.0.0: the run's tcp listeners (streams) take "
                          "connections on every interface of this machine") and err.count("\n") == 1, err
    assert "signed with the run's secret (HMAC-SHA256)" in err and "none is encrypted" in err and "docs/security.md" in err


def test_a_launcher_that_fails_before_its_workers_start_leaves_no_socket_directory(run_dir, monkeypatch):
    import errno
    import os
    from pathlib import Path

    from srl.config.load import load_config
    from srl.launch.run import run_experiment
    from srl.streams.local import IPC_PREFIX

    def refused(graph):
        raise OSError(errno.EADDRINUSE, "Address already in use")

    monkeypatch.setattr(local_launcher, "_tcp_wire", refused)
    with pytest.raises(OSError, match="Address already in use"):
        run_experiment(load_config("cartpole-ppo", ["dataflow.transport=tcp", f"run.run_dir={run_dir}", "monitor.display=off"]))
    assert list(Path(os.environ["SRL_IPC_DIR"]).glob(f"{IPC_PREFIX}{os.getpid()}-*")) == []
