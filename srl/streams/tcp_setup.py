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


def free_ports(host: str, count: int) -> list[int]:
    """`count` ports free on `host` now. All are held open together, so they differ; another
    program could still take one before its stream binds it (then that worker fails loudly)."""
    probes = []
    try:
        for _ in range(count):
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            probe = socket.socket(family, socket.SOCK_STREAM)
            probes.append(probe)
            probe.bind(("" if host in WILDCARDS else host, 0))
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
