"""What a tcp listener lets in, and who holds it (srl.streams.listeners):

- a listener keeps at most its cap of connections at once, and a connection that never completes
  ZeroMQ's handshake ends within HANDSHAKE_IVL_MS; a peer refused at the cap gets in once there is room;
- thousands of silent connections to a running controller raise its open files by no more than its
  listeners' caps, and its workers keep reporting;
- a worker that the local launcher restarts (forked from the controller) holds none of the
  controller's listening sockets.
"""

from __future__ import annotations

import json
import os
import random
import resource
import secrets
import signal
import socket
import time

import psutil
from test_faults import kill_now
from test_rendezvous import watch_a_run_with_kills
from test_shutdown import spawn, srl_command, wait_for_metrics, workers_of

from srl.config.load import load_config
from srl.streams.listeners import HANDSHAKE_IVL_MS, connection_cap
from srl.streams.tcp import TcpTransport, Wire
from srl.streams.tcp_setup import free_ports

HANDSHAKE_S = HANDSHAKE_IVL_MS / 1000
SILENT_CONNECTIONS = 2000
MARGIN_FILES = 64  # the controller's own files come and go (metrics, checkpoints), and the cap's thread may lag


def until(check, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def accepted(pid: int, port: int) -> int:
    """Connections that process `pid` holds on its listener at `port`."""
    return sum(1 for c in psutil.Process(pid).net_connections("tcp")
               if c.laddr and c.laddr.port == port and c.status != psutil.CONN_LISTEN)  # fmt: skip


def test_a_listener_keeps_its_cap_of_connections_and_ends_silent_ones():
    port = free_ports("127.0.0.1", 1)[0]
    wire = Wire(secrets.token_bytes(32), {"a": port}, connection_caps={"a": 8})
    owner, peer = TcpTransport(wire), TcpTransport(wire)
    receiver = owner.receiver("a")
    silent: list[socket.socket] = []
    try:
        silent += [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(100)]
        assert until(lambda: accepted(os.getpid(), port) == 8, 10), accepted(os.getpid(), port)
        time.sleep(0.5)
        assert accepted(os.getpid(), port) == 8, "the cap holds"
        assert owner.connections.open_connections() == {"a": 8}
        assert owner.connections.refusals.total["a"] == 92
        # refused while the silent ones fill the cap, then let in. Sent again until it arrives: a
        # message queued on a connection that the cap then shuts is lost with it (seen once in CI)
        sender, got = peer.sender("a"), []

        def arrived() -> bool:
            sender.send((7,))
            time.sleep(0.2)
            got.extend(receiver.recv_all())
            return bool(got)

        assert until(arrived, HANDSHAKE_S + 10), "the peer got in"
        assert {m.header for m in got} == {(7,)}
        assert until(lambda: accepted(os.getpid(), port) == 1, 5), "the silent ones ended at the handshake's timeout"
    finally:
        for s in silent:
            s.close()
        peer.close()
        owner.close()


def _listening_ports(pid: int) -> list[int]:
    return sorted({c.laddr.port for c in psutil.Process(pid).net_connections("tcp") if c.status == psutil.CONN_LISTEN})


def _connect_silently(ports: list[int], count: int) -> list[socket.socket]:
    """`count` connections spread over `ports`, connecting in the background; they never send."""
    out = []
    try:
        for k in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            out.append(s)
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", ports[k % len(ports)]))
    except BaseException:
        for s in out:
            s.close()
        raise
    return out


def test_silent_connections_do_not_raise_the_controller_s_open_files_past_its_caps(run_dir):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    count = SILENT_CONNECTIONS if hard == resource.RLIM_INFINITY else min(SILENT_CONNECTIONS, hard - 256)
    proc = spawn(srl_command("run", "cartpole-ppo", f"run.run_dir={run_dir}", "stop.total_env_steps=10000000000",
                             "stop.target_return=null", "dataflow.transport=tcp", "monitor.display=off"))  # fmt: skip
    silent: list[socket.socket] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, count + 256), hard))
        wait_for_metrics(run_dir, proc)
        controller = psutil.Process(proc.pid)
        ports, workers = _listening_ports(proc.pid), len(workers_of(proc))
        assert len(ports) == 2, "controller.in and control.out"
        before = controller.num_fds()
        silent = _connect_silently(ports, count)
        # at most the caps' room past the workers' own connections, which are open already: once
        # the burst is in (some connect on a SYN's retry, and the cap's thread refuses each a moment
        # after ZeroMQ accepts it: up to 110 more on a loaded 2-vCPU VM), and while they stay open
        room = len(ports) * (connection_cap(workers) - workers)
        assert until(lambda: controller.num_fds() - before <= room + MARGIN_FILES, 5), (controller.num_fds() - before, room)
        rises = []
        for _ in range(10):
            rises.append(controller.num_fds() - before)
            time.sleep(0.1)
        assert sorted(rises)[len(rises) // 2] <= room + MARGIN_FILES, (rises, room, count)
        assert min(accepted(proc.pid, p) for p in ports) >= workers, "the workers' connections stay"
        lines = len((run_dir / "metrics.jsonl").read_text().splitlines())
        wait_for_metrics(run_dir, proc, lines=lines + 2)  # the workers still report
        assert until(lambda: controller.num_fds() - before <= MARGIN_FILES, HANDSHAKE_S + 5), "silent ones end"
    finally:
        for s in silent:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert "refused" in out and "past its cap" in out, "the refusals are logged"


def test_a_restarted_worker_holds_none_of_the_controller_s_listening_sockets(run_dir):
    """tcp: the controller listens on controller.in and control.out while it forks a restarted actor."""
    config = load_config("cartpole-ppo", [
        "dataflow.transport=tcp", "launch.num_actor_workers=2", "stop.total_env_steps=10000000000",
        "stop.target_return=null", "stop.time_limit_s=20", f"run.run_dir={run_dir}", "monitor.display=off",
        "monitor.learning_curve=false",
    ])  # fmt: skip
    killed: list[str | None] = []

    def killer(watch) -> None:
        # the kill once the watch has looked at the run's 4 workers (2 actors, trainer, params): a
        # worker killed before it was seen would leave its restart uncounted
        until(lambda: (run_dir / "metrics.jsonl").exists() and len(watch.seen_workers) >= 4, 60)
        killed.append(kill_now(os.getpid(), ("actor",), random.Random(0)))

    watch = watch_a_run_with_kills(config, killer, join_s=70)
    summary = json.loads((run_dir / "summary.json").read_text())
    name = ":".join(killed[0].split(":")[2:]) if killed and killed[0] else None
    assert name and summary["restarts"] == {name: 1}, (killed, summary)
    assert len(watch.seen_workers) >= 5, "the watch saw the restarted actor (2 actors, trainer, params, then it)"
    assert len(watch.listening) >= 2, "the controller listens on its streams"
    assert watch.held == []


def test_a_stream_s_port_in_use_is_tried_again_then_refused_naming_what_holds_it(monkeypatch):
    """A restarted worker binds its predecessor's port: one still held (here by a connection out
    from it) is tried again for BIND_RETRY_S, then the error names the port and the holder."""
    import srl.streams.listeners as listeners

    monkeypatch.setattr(listeners, "BIND_RETRY_S", 0.3)
    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    taken = client.getsockname()[1]
    started = time.monotonic()
    try:
        listeners.listen("127.0.0.1", taken)
        raise AssertionError("bound a port a connection holds")
    except OSError as error:
        message = str(error)
    finally:
        client.close()
        server.close()
    assert time.monotonic() - started >= 0.3
    assert f"port {taken} on 127.0.0.1" in message and "ESTABLISHED to 127.0.0.1:" in message, message


def test_stream_ports_are_chosen_below_the_ephemeral_range():
    """Outgoing connections take free ports of the ephemeral range: a stream's port, bound by
    each restart of its owner, is chosen below it (srl.streams.tcp_setup.PORT_BAND_LOW)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    ports = free_ports("127.0.0.1", 64)
    assert len(set(ports)) == 64 and all(20_000 <= p < low for p in ports), ports
