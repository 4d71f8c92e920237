"""What this machine allows a run, checked before any process starts (`check_machine`).

The config's static bounds live on its fields (srl.config); these depend on the machine the
controller runs on: its CPUs, its open-file limit, its free shared memory and memory. A run
that asks for more fails here with one ConfigError naming the fields and the machine's limit,
not minutes later with "Too many open files", a bus error or the OOM killer. The limits are
generous multiples, so that only a typo or a runaway value trips them:

- worker processes: at most WORKERS_PER_CPU per CPU this process may run on;
- sockets of one process (a policy worker's, one per actor it serves): within ZeroMQ's limit for
  a context, on any machine (each process sizes its context by the graph: srl.streams.local);
- torch threads of one process: at most THREADS_PER_CPU per CPU;
- open files: each process holds about FILES_PER_WORKER per worker of the run (sockets, shared
  blocks, inherited descriptors; measured on a local run), and strangers' connections up to its
  tcp listeners' caps (`listener_room`), which must fit under the hard RLIMIT_NOFILE
  (`raise_open_files_limit` lifts the soft one to it when needed);
- shared memory: the actors' (and buffer's) blocks must fit in /dev/shm's free space;
- memory: those blocks, the trainer's batch and the replay memory must fit in the memory
  available now (psutil), with MEMORY_HEADROOM to spare for the processes themselves;
- dataflow.bind_host, where this machine's listeners bind it (tcp streams, the trainers'
  rendezvous): an address of this machine (else the first bind raised Errno 99 from the launcher,
  after its socket directory was made); a wildcard (0.0.0.0, ::) gets a one-line warning, as every
  interface then listens.

The launcher that places workers on other machines (ray with a cluster address) is checked for
threads only: this machine's limits are not the cluster's.
"""

from __future__ import annotations

import ipaddress
import resource
import shutil
import socket
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import psutil

from srl.config import ConfigError
from srl.devices import cpu_count
from srl.graph import Graph
from srl.streams.listeners import connection_cap
from srl.streams.tcp import WILDCARDS

WORKERS_PER_CPU = 32
THREADS_PER_CPU = 4
FILES_PER_WORKER = 12
FILES_BASE = 64
MEMORY_HEADROOM = 0.9  # of the available memory a run's arrays may take
SHM_DIR = Path("/dev/shm")


def gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def check_machine(graph: Graph) -> None:
    """Raise ConfigError if this machine cannot hold the run of `graph` (see the module doc)."""
    c = graph.config
    cpus = cpu_count()
    _check_threads(c.launch.torch_threads, "launch.torch_threads", cpus)
    if c.launch.trainer_torch_threads is not None:
        _check_threads(c.launch.trainer_torch_threads, "launch.trainer_torch_threads", cpus)
    _check_bind_host(graph)
    if c.launch.launcher != "inline":
        _check_sockets(graph)
    if c.launch.launcher == "ray" and c.launch.ray_address is not None:
        return
    if c.launch.launcher != "inline":
        _check_processes(graph, cpus)
        _check_open_files(graph)
    shm = shared_bytes(graph) if c.launch.launcher != "inline" and c.dataflow.transport == "shm" else 0
    if shm:
        free = shutil.disk_usage(SHM_DIR).free if SHM_DIR.is_dir() else None
        if free is not None and shm > free:
            raise ConfigError(f"shared memory: {_blocks_needed(graph, shm)}, but {SHM_DIR} has {gib(free)} "
                              f"free; {LOWER_SIZES}")
    _check_memory(graph)


def _check_bind_host(graph: Graph) -> None:
    """dataflow.bind_host, where a listener binds it: one of this machine's addresses (tried by binding
    it, as a stream will), or a wildcard, said once. Under Ray a listener binds its own node's IP,
    unless bind_host is a wildcard."""
    c = graph.config
    host, launcher = c.dataflow.bind_host, c.launch.launcher
    if launcher == "inline" or (c.dataflow.transport != "tcp" and not graph.of_kind("gradients")):
        return  # nothing listens on tcp
    if host in WILDCARDS:
        where = "of every node" if launcher == "ray" else "of this machine"
        listeners = ["streams"] * (c.dataflow.transport == "tcp") + ["the trainers' rendezvous"] * bool(graph.of_kind("gradients"))
        print(f"srl: warning: dataflow.bind_host={host}: the run's tcp listeners ({' and '.join(listeners)}) "
              f"take connections on every interface {where}; every message must be signed with "
              "the run's secret (HMAC-SHA256) and sealed against replay, so none from outside the run is "
              "taken, but none is encrypted: whoever sees the traffic can read it (docs/security.md)",
              file=sys.stderr)
        return
    if launcher == "ray":
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
    except OSError as e:
        raise ConfigError(f"field 'dataflow.bind_host': {host} is no address of this machine ({e.strerror}); "
                          f"its addresses: {', '.join(host_addresses())}; 0.0.0.0 listens on every interface") from None


def host_addresses() -> list[str]:
    """This machine's IPv4 and IPv6 addresses (psutil), loopback first."""
    found = {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs
             if a.family in (socket.AF_INET, socket.AF_INET6)}
    found = {a for a in found if not ipaddress.ip_address(a).is_link_local}  # fe80::: bound only with its interface
    return sorted(found, key=lambda a: (not ipaddress.ip_address(a).is_loopback, ":" in a, a))


def _check_threads(threads: int, field: str, cpus: int) -> None:
    limit = THREADS_PER_CPU * cpus
    if threads > limit:
        raise ConfigError(f"field {field!r}: {threads} torch threads per process exceed {limit} "
                          f"({THREADS_PER_CPU} per CPU, this machine gives the run {cpus} CPUs)")


def _check_processes(graph: Graph, cpus: int) -> None:
    limit = WORKERS_PER_CPU * cpus
    if len(graph.workers) > limit:
        raise ConfigError(
            f"{_worker_counts(graph)}: {len(graph.workers)} worker processes exceed {limit} "
            f"({WORKERS_PER_CPU} per CPU, this machine gives the run {cpus} CPUs)"
        )


def _check_sockets(graph: Graph) -> None:
    """One process's sockets (a policy worker's: one per actor it serves) within what ZeroMQ allows
    one context (zmq.SOCKET_LIMIT), on any machine: each process sizes its context so."""
    import zmq

    from srl.streams.local import SPARE_SOCKETS

    context = zmq.Context()
    try:
        limit = context.get(zmq.SOCKET_LIMIT)
    finally:
        context.term()
    needed = graph.sockets_per_process() + SPARE_SOCKETS
    if needed > limit:
        raise ConfigError(
            f"{_worker_counts(graph)}: one process would open {needed} sockets (a policy worker or trainer one per "
            f"actor it serves), over ZeroMQ's limit of {limit} (zmq.SOCKET_LIMIT); run more policy workers or "
            "trainers, or fewer actors"
        )


def files_needed(graph: Graph) -> int:
    return FILES_BASE + FILES_PER_WORKER * len(graph.workers) + listener_room(graph)


def listener_room(graph: Graph) -> int:
    """The most connections that strangers can hold open in one process: the room its tcp
    listeners' caps leave past the workers that connect to them (srl.streams.listeners). Every
    stream listens on tcp with dataflow.transport=tcp, and the trainers' rendezvous on any."""
    tcp = graph.config.dataflow.transport == "tcp"
    room: Counter[str] = Counter()
    for stream in graph.streams:
        if (tcp and stream.via == "transport") or stream.kind == "gradients":
            connecting = len(stream.workers) - 1  # all but its owner
            room[stream.owner] += connection_cap(connecting) - connecting
    return max(room.values(), default=0)


def _check_open_files(graph: Graph) -> None:
    needed = files_needed(graph)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and needed > hard:
        raise ConfigError(
            f"{_worker_counts(graph)}: {len(graph.workers)} workers need about {needed} open files per "
            f"process, over the limit of {hard} (RLIMIT_NOFILE hard limit; raise it with ulimit -Hn, "
            "or run fewer workers)"
        )


def raise_open_files_limit(graph: Graph) -> None:
    """Lift this process's soft RLIMIT_NOFILE (its workers inherit it) to what the run needs,
    up to the hard limit that check_machine compared with."""
    needed = files_needed(graph)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _worker_counts(graph: Graph) -> str:
    c = graph.config
    if c.pod.enabled:
        return f"field 'pod.ensemble.population': {c.pod.ensemble.population}"
    fields = [f"launch.num_actor_workers={c.launch.num_actor_workers}"]
    if c.dataflow.inference == "policy_worker":
        fields.append(f"launch.num_policy_workers={c.launch.num_policy_workers}")
    fields.append(f"launch.num_trainers={c.launch.num_trainers}")
    return "fields " + ", ".join(fields)


def shared_bytes(graph: Graph) -> int:
    """Bytes of every shared block of the run (actors' slots, the buffer's batch slots)."""
    return sum(layout.nbytes for layout in graph.block_layouts().values())


def _blocks_needed(graph: Graph, total: int) -> str:
    c = graph.config
    if c.pod.enabled:
        return f"the run's blocks need {gib(total)}"
    per_actor = graph.actor_layout().nbytes
    flow = c.dataflow
    return (f"{c.launch.num_actor_workers} actor blocks of {gib(per_actor)} (dataflow.ring_splits={flow.ring_splits} x "
            f"dataflow.segment_slots={flow.segment_slots} segments of sample_length + 1 = {flow.sample_length + 1} steps x "
            f"{graph.rows_per_split} rows, plus inference slots) and the rest need {gib(total)} in all")


LOWER_SIZES = "lower segment_slots, sample_length, envs_per_actor or num_actor_workers"


def _fields_bytes(fields: dict) -> int:
    return sum(int(np.prod(f.shape, dtype=np.int64)) * np.dtype(f.dtype).itemsize for f in fields.values())


def replay_bytes(graph: Graph) -> int:
    """The buffer worker's replay memory when full: its items and their priorities."""
    replay = graph.config.replay
    if replay is None:
        return 0
    return replay.capacity * (_fields_bytes(graph.replay_fields()) + 3 * 8)  # + sum-tree nodes and insertion stamps


def batch_bytes(graph: Graph) -> int:
    """The trainer's batch of segments (each trainer holds one)."""
    if graph.config.pod.enabled or graph.config.replay is not None:
        return 0
    steps = graph.config.dataflow.sample_length + 1
    return steps * graph.rows_per_batch * _fields_bytes(graph.segment_fields()) * graph.config.launch.num_trainers


def _check_memory(graph: Graph) -> None:
    if graph.config.pod.enabled:
        return
    blocks = shared_bytes(graph)
    if graph.config.dataflow.transport == "tcp":  # no shared memory: each block lives in its actor and its reader
        blocks *= 2
    needed = blocks + batch_bytes(graph) + replay_bytes(graph)
    available = psutil.virtual_memory().available
    if needed > MEMORY_HEADROOM * available:
        parts = f"slots {gib(blocks)}, trainer batches {gib(batch_bytes(graph))}"
        if graph.config.replay is not None:
            parts += f", replay memory {gib(replay_bytes(graph))} (replay.capacity={graph.config.replay.capacity})"
        raise ConfigError(
            f"memory: the run's arrays need {gib(needed)} ({parts}), over {MEMORY_HEADROOM:.0%} of the "
            f"{gib(available)} this machine has available; {LOWER_SIZES}"
            + (", or replay.capacity" if graph.config.replay is not None else "")
        )
