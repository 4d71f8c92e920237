"""The launcher's side of the tcp backend: a port for every stream, a secret, the limits, and
each stream's largest message, which sizes its queues (srl.streams.queues).

The secret is made here, in the launcher's memory, and reaches workers only as an argument
(fork, or a cluster engine's task arguments): it is never written to the run directory.
"""

from __future__ import annotations

import secrets
import socket
from typing import Any

import numpy as np

from srl.config import ConfigError
from srl.streams.batches import BATCHES_NAME, RELEASED_NAME
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, MAX_REPORT_BYTES
from srl.streams.inference import replies_name, requests_name
from srl.streams.params import SERVICE_IN, SERVICE_OUT
from srl.streams.queues import messages_within
from srl.streams.samples import released_name, samples_name
from srl.streams.tcp import WILDCARDS, Wire
from srl.streams.wire import Limits, message_bytes

SECRET_BYTES = 32

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
        [s.nbytes for s in arrays] + [t.numel() * t.element_size() for t in tensors] + [MAX_REPORT_BYTES]
    )
    per_slot = max(len(graph.segment_fields()), len(graph.slot_fields()) + 1, batch_columns)
    return Limits(max_frames=max(per_slot, len(tensors), 1), max_frame_bytes=int(np.int64(largest)))


def _slot_bytes(arrays: dict[str, Any], prefix: str) -> int:
    """A message carrying (some of) one slot's arrays: those named `prefix`..."""
    return message_bytes([spec.nbytes for name, spec in arrays.items() if name.startswith(prefix)])


def slot_message_bytes(graph: Any) -> dict[str, int]:
    """The largest message of each stream that hands over slots: a segment (samples), an inference
    slot (requests carry its observations, replies the rest), a replay batch (and its priorities
    back), or a header alone (an actor's released segments)."""
    c = graph.config
    if c.pod:
        return {}
    actor = graph.actor_layout().arrays
    segment, infer = _slot_bytes(actor, "sample.0.0."), _slot_bytes(actor, "infer.0.")
    sizes = {samples_name(t): segment for t in range(c.num_trainers)}
    sizes.update({requests_name(p): infer for p in range(c.num_policy_workers)})
    for a in range(c.num_actor_workers):
        sizes.update({replies_name(a): infer, released_name(a): message_bytes([])})
    if c.replay is not None:
        sizes[BATCHES_NAME] = sizes[RELEASED_NAME] = _slot_bytes(graph.buffer_layout().arrays, "batch.0.")
    return sizes


def stream_message_bytes(graph: Any, policy: Any) -> dict[str, int]:
    """Every stream's largest message: what its receivers take (a larger one is refused) and what
    sizes its queues. Parameters carry the policy's tensors; control messages one report."""
    tensors = message_bytes([t.numel() * t.element_size() for t in policy.state_dict().values()])
    report = message_bytes([MAX_REPORT_BYTES])
    sizes = {CONTROLLER_IN: report, CONTROL_OUT: report, SERVICE_IN: tensors, SERVICE_OUT: tensors}
    return {**sizes, **slot_message_bytes(graph)}


def check_queues(graph: Any) -> None:
    """transport=tcp: a stream whose messages are all needed has as many in flight to one peer as
    its slots allow; the byte budget must hold them, or a send would block at the bound (and drop
    after srl.streams.queues.SEND_TIMEOUT_S). On shm these messages are headers, which the smallest
    budget holds by the ten thousand."""
    c = graph.config
    if c.transport != "tcp" or c.launcher == "inline" or c.pod:
        return
    in_flight = {samples_name(t): c.ring_splits * c.segment_slots for t in range(c.num_trainers)}
    if c.inference == "policy_worker":
        in_flight.update({requests_name(p): c.ring_splits for p in range(c.num_policy_workers)})
        in_flight.update({replies_name(a): c.ring_splits for a in range(c.num_actor_workers)})
    if c.replay is not None:
        in_flight[BATCHES_NAME] = in_flight[RELEASED_NAME] = c.replay.batch_slots
    sizes = slot_message_bytes(graph)
    budget = c.max_queued_bytes_per_peer
    for name, count in in_flight.items():
        if count > messages_within(budget, sizes[name]):
            raise ConfigError(
                f"field 'max_queued_bytes_per_peer': {budget} bytes per peer hold "
                f"{messages_within(budget, sizes[name])} message(s) of stream {name!r} ({sizes[name]} bytes "
                f"each), and its slots put up to {count} in flight to one peer; set it to at least "
                f"{count * sizes[name]}, or use fewer or smaller slots"
            )


def make_wire(graph: Any, policy: Any) -> Wire:
    host = graph.config.bind_host
    names = stream_names(graph.config)
    ports = dict(zip(names, free_ports(host, len(names))))
    return Wire(
        secrets.token_bytes(SECRET_BYTES), ports, host, limits=run_limits(graph, policy),
        max_queued_bytes=graph.config.max_queued_bytes_per_peer, message_bytes=stream_message_bytes(graph, policy),
    )
