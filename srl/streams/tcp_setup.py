"""The launcher's side of the tcp backend: a port for every stream the graph declares (srl.graph),
a secret, the limits, each stream's largest message, which sizes its queues (srl.streams.queues),
and the most connections its listener keeps (srl.streams.listeners).

The secret is made here, in the launcher's memory, and reaches workers only as an argument
(fork, or a cluster engine's task arguments): it is never written to the run directory.
"""

from __future__ import annotations

import dataclasses
import secrets
import socket
from typing import Any

from srl.config import ConfigError
from srl.streams.listeners import connection_cap
from srl.streams.params import SERVICE_IN, SERVICE_OUT
from srl.streams.queues import messages_within
from srl.streams.tcp import WILDCARDS, Wire
from srl.streams.wire import Limits

SECRET_BYTES = 32
# Stream ports are chosen from PORT_BAND_LOW up to just below the kernel's ephemeral range
# (net.ipv4.ip_local_port_range, 32768-60999 by default), above Ray's worker ports (10002-19999).
# A port is chosen once, when the run is placed, and bound again by every restart of its owner. In
# the ephemeral range (bind to port 0, as srl did) it was free only while nobody connected out:
# any process's outgoing connection may take a free ephemeral port as its own, between the choice
# and the bind, or between a worker's death and its restart, and keep it while the connection
# lives; every restart then fails alike ("Address already in use", three restarts, the run ends:
# seen once in CI on a Ray head busy with a lost host's workers). Below the range no connection
# takes one; only a program that binds that very port can.
PORT_BAND_LOW = 20_000
EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
PROBES_PER_PORT = 4  # ports tried per port wanted before the rest are left to the kernel


def ephemeral_low() -> int:
    """The first port of this network namespace's ephemeral range (Linux's default elsewhere)."""
    try:
        with open(EPHEMERAL_RANGE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(host: str, count: int) -> list[int]:
    """`count` ports free on `host` now, below the ephemeral range where it leaves room (see
    PORT_BAND_LOW), else any the kernel picks. All are held open together, so they differ; a
    program that binds one of them by number could still take it first (that worker then fails
    loudly, naming the port and what holds it: srl.streams.listeners)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    address = "" if host in WILDCARDS else host
    band = range(PORT_BAND_LOW, ephemeral_low())
    tries = secrets.SystemRandom().sample(band,  # not `random`'s: a run seeds it, and two runs would try alike
                                           min(len(band), PROBES_PER_PORT * count))
    probes: list[socket.socket] = []
    try:
        for port in tries:
            if len(probes) == count:
                break
            probe = socket.socket(family, socket.SOCK_STREAM)  # no SO_REUSEADDR: a port in TIME_WAIT is skipped too
            try:
                probe.bind((address, port))
            except OSError:
                probe.close()
                continue
            probes.append(probe)
        while len(probes) < count:  # the band is full or absent: any port
            probe = socket.socket(family, socket.SOCK_STREAM)
            probes.append(probe)
            probe.bind((address, 0))
        return [p.getsockname()[1] for p in probes]
    finally:
        for probe in probes:
            probe.close()


def run_limits(graph: Any) -> Limits:
    """Frames no bigger than the largest a stream may carry (a slot's array, a parameter tensor, a
    report); no more frames than its largest message has."""
    frames = [s.frames for s in graph.streams if s.via == "transport"]
    return Limits(max_frames=max([len(f) for f in frames] + [1]), max_frame_bytes=max((b for f in frames for b in f), default=1))


def check_queues(graph: Any) -> None:
    """dataflow.transport=tcp: a stream whose messages are all needed (a slot stream) has as many in flight
    to one peer as its slots allow; the byte budget must hold them, or a send would block at the
    bound (and drop after srl.streams.queues.SEND_TIMEOUT_S). On shm these messages are headers,
    which the smallest budget holds by the ten thousand."""
    c = graph.config
    if c.dataflow.transport != "tcp" or c.launch.launcher == "inline":
        return
    sizes, budget = graph.message_bytes(shares_memory=False), c.dataflow.max_queued_bytes_per_peer
    for stream in graph.streams:
        size, count = sizes.get(stream.name, 0), stream.in_flight
        if count > messages_within(budget, size):
            raise ConfigError(
                f"field 'dataflow.max_queued_bytes_per_peer': {budget} bytes per peer hold "
                f"{messages_within(budget, size)} message(s) of stream {stream.name!r} ({size} bytes "
                f"each), and its slots put up to {count} in flight to one peer; set it to at least "
                f"{count * size}, or use fewer or smaller slots"
            )


def make_wire(graph: Any) -> Wire:
    host = graph.config.dataflow.bind_host
    streams = [s for s in graph.streams if s.via == "transport"]
    ports = dict(zip([s.name for s in streams], free_ports(host, len(streams))))
    return Wire(
        secrets.token_bytes(SECRET_BYTES), ports, host, limits=run_limits(graph),
        max_queued_bytes=graph.config.dataflow.max_queued_bytes_per_peer,
        message_bytes=graph.message_bytes(shares_memory=False), connection_caps=connection_caps(graph),
    )


def connection_caps(graph: Any) -> dict[str, int]:
    """Each stream's: all but its owner connect. The service's parameter streams leave room for
    every relayed subscriber too: a restarted one subscribes to the service itself (srl.launch.supervise)."""
    relayed = len(graph.param_relays)
    return {s.name: connection_cap(len(s.workers) - 1 + (relayed if s.name in (SERVICE_IN, SERVICE_OUT) else 0))
            for s in graph.streams if s.via == "transport"}  # fmt: skip


def with_streams_of(wire: Wire, graph: Any) -> Wire:
    """`wire` for `graph`, which a launcher made from the graph `wire` was made for by adding
    workers and streams (parameter relays, srl.graph.with_param_relays): their largest messages and
    connection caps (the ports are the launcher's to find)."""
    return dataclasses.replace(wire, message_bytes=graph.message_bytes(shares_memory=False),
                               connection_caps=connection_caps(graph))
