"""The launcher's side of the tcp backend: a port for every stream, a secret, and the limits.

The secret is made here, in the launcher's memory, and reaches workers only as an argument
(fork, or a cluster engine's task arguments): it is never written to the run directory.
"""

from __future__ import annotations

import secrets
import socket
from typing import Any

import numpy as np

from srl.streams.batches import BATCHES_NAME, RELEASED_NAME
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN
from srl.streams.inference import replies_name, requests_name
from srl.streams.params import SERVICE_IN, SERVICE_OUT
from srl.streams.samples import released_name, samples_name
from srl.streams.tcp import WILDCARDS, Wire
from srl.streams.wire import Limits

SECRET_BYTES = 32
CONTROL_FRAME_BYTES = 4 << 20  # one JSON report; generous, reports are a few KiB


CONTROLLER = "controller"


def stream_owners(config: Any) -> dict[str, str]:
    """Every name a receiver or publisher binds in a run of `config` -> the worker that binds it
    (see srl.workers.build), or CONTROLLER. Others connect to the owner's host."""
    owners = {CONTROLLER_IN: CONTROLLER, CONTROL_OUT: CONTROLLER, SERVICE_IN: "params:0", SERVICE_OUT: "params:0"}
    owners.update({samples_name(t): f"trainer:{t}" for t in range(config.num_trainers)})
    owners.update({requests_name(p): f"policy:{p}" for p in range(config.num_policy_workers)})
    for a in range(config.num_actor_workers):
        owners.update({replies_name(a): f"actor:{a}", released_name(a): f"actor:{a}"})
    if config.replay is not None:  # actors -> the buffer worker -> trainer batches, and their release
        owners.update({samples_name(0): "buffer:0", BATCHES_NAME: "trainer:0", RELEASED_NAME: "buffer:0"})
    return owners


def stream_names(config: Any) -> list[str]:
    return list(stream_owners(config))


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


def run_limits(graph: Any, policy: Any) -> Limits:
    """Frames no bigger than the largest array a stream may carry: a slot array (segment or
    replay batch), a parameter tensor or a report; no more frames than a slot or the policy's
    state has."""
    arrays = [] if graph.config.pod else list(graph.actor_layout().arrays.values())
    batch_columns = 0
    if graph.config.replay is not None:
        arrays += list(graph.buffer_layout().arrays.values())
        batch_columns = len(graph.batch_fields())
    tensors = list(policy.state_dict().values())
    largest = max(
        [s.nbytes for s in arrays] + [t.numel() * t.element_size() for t in tensors] + [CONTROL_FRAME_BYTES]
    )
    per_slot = max(len(graph.segment_fields()), len(graph.slot_fields()) + 1, batch_columns)
    return Limits(max_frames=max(per_slot, len(tensors), 1), max_frame_bytes=int(np.int64(largest)))


def make_wire(graph: Any, policy: Any) -> Wire:
    host = graph.config.bind_host
    names = stream_names(graph.config)
    ports = dict(zip(names, free_ports(host, len(names))))
    return Wire(secrets.token_bytes(SECRET_BYTES), ports, host, limits=run_limits(graph, policy))
