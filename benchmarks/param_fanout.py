"""Parameter fan-out: one parameter service against 1 .. 1,024 subscribers (issue 34).

The REAL parameter stream runs here, over the real TcpTransport signed with a run's secret: a
publisher process (srl.streams.params.ParamPublisher, the trainer's side) and the service kernel
(srl.workers.params.ParamServiceKernel, in a process of its own, looped as its shell loops it)
on one host; the subscribers (srl.streams.params.ParamSubscriber, as an actor or policy worker
holds it) in one process per subscriber host, many in a process: each loads every version it sees
into a policy whose state_dict has `size` bytes. Each cell publishes version 0, waits until every
subscriber holds it (all connected), then publishes `--versions` versions at `--rate-hz`.

Topologies (`--topology`):
- `direct`: every subscriber subscribes to the service (srl today);
- `relay`: the TOPOLOGY of a relay per host, built from the same classes, NOT an srl feature: one
  process per subscriber host subscribes once to the service (tcp) and republishes each version it
  loads to a parameter service of its own on that host (ParamPublisher -> ParamServiceKernel over
  the ipc LocalTransport), which that host's subscribers subscribe to, as its actors would;
- `srl-relay`: srl's own relay worker (srl.workers.params.ParamRelayKernel, dataflow.param_relay),
  one process per subscriber host looped as its worker shell loops it: subscribed once upstream
  (tcp), serving that host's subscribers over the ipc LocalTransport; it forwards their WANTs
  upstream and passes the frames on without decoding or loading them.

Networks (`--nets`): `loopback` (every process in this namespace on 127.0.0.1; the subscriber
"hosts" are groups of processes), or a rate such as `1gbit`, `100mbit`: a cluster of network
namespaces (srl.testing.hosts, needs root), the service and publisher on host a, the subscribers
spread over the other `--hosts` hosts, every host's link shaped to that rate; or a delay such as
`1ms`: the same hosts, links not shaped, every frame between two hosts delayed that long (a
user-space forwarder, `srl.testing.hosts up --delay-ms`; `0ms` is the forwarder's own cost).

Per cell it measures:
- `publish_to_last_s_p50`/`_max`: over the measured versions, from the publish to the moment the
  last subscriber holds that version or a newer one (CLOCK_MONOTONIC, which namespaces share);
- `egress_bytes_per_s`: bytes the service's params.out socket sent, acknowledged (the kernel's
  tcp_info bytes_acked of its connections, read with `ss`), over the measured phase;
  `copies_per_version`: those bytes / (versions x one message's size): N for N direct
  subscribers, the number of hosts through relays; more where the service answered WANTs;
- `skipped_versions`: (subscriber, version) pairs a subscriber never loaded (it got a newer one
  first, NEWEST_ONLY); `all_have_last`: every subscriber holds the last version at the end;
- `warm_s`, `warm_copies`: from the publish of version 0 to every subscriber holding it, and the
  copies of it the service sent meanwhile (it answers each WANT of a subscriber that has no
  version yet by publishing to all of them).

    python benchmarks/param_fanout.py                                    # short: loopback, a few cells
    python benchmarks/param_fanout.py --subscribers 1,16,128,1024 --sizes 64k,1m,8m \\
        --nets loopback,1gbit,100mbit --topology direct,relay --hosts 4     # the full grid

A cell whose one version would make more than `--max-version-bytes` (subscribers x size) of copies
is left out and listed in `skipped_cells` (the machine's memory, not the design, bounds it).
Prints one JSON line: {"cells": [...], "skipped_cells": [...], "config": {...}}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import zmq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from srl.streams import wire as wire_format  # noqa: E402
from srl.streams.framing import pack  # noqa: E402
from srl.streams.listeners import connection_cap  # noqa: E402
from srl.streams.params import (  # noqa: E402
    ANSWER_INTERVAL_S,
    SERVICE_IN,
    SERVICE_OUT,
    ParamPublisher,
    ParamSubscriber,
    state_frames,
    tensor_bytes,
)
from srl.streams.tcp import TcpTransport, Wire  # noqa: E402
from srl.streams.tcp_setup import SECRET_BYTES, free_ports  # noqa: E402

TENSORS = 4  # the model's state_dict: this many float32 tensors of equal size
WAIT_S = 0.05  # a loop's wait for a message, as a worker's shell waits
SETTLE_TIMEOUT_S = 120.0  # the longest a cell waits for the last version to reach everyone
ACK_WAIT_S = 0.2  # after the last load, for the last bytes' acknowledgement (a delayed ACK: 40 ms)
SIZES = {"k": 1 << 10, "m": 1 << 20}


class Model(torch.nn.Module):
    """A policy whose state_dict holds `size_bytes` (TENSORS float32 tensors)."""

    def __init__(self, size_bytes: int) -> None:
        super().__init__()
        per = max(1, size_bytes // (4 * TENSORS))
        self.weights = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(per)) for _ in range(TENSORS)])


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)([km]?)", text.lower())
    if match is None:
        raise SystemExit(f"--sizes: {text!r} is not a size such as 64k, 1m, 8m")
    return int(match.group(1)) * SIZES.get(match.group(2), 1)


# --- the wire a cell's processes share (the secret goes through stdin, never argv) --------------
def make_wire(host: str, size_bytes: int, connecting: int) -> Wire:
    frames = tensor_bytes(Model(size_bytes))
    largest = wire_format.message_bytes(frames)
    ports = dict(zip([SERVICE_IN, SERVICE_OUT], free_ports("127.0.0.1", 2)))
    return Wire(secrets.token_bytes(SECRET_BYTES), ports, host,
                message_bytes={SERVICE_IN: largest, SERVICE_OUT: largest},
                connection_caps={SERVICE_IN: connection_cap(connecting), SERVICE_OUT: connection_cap(connecting)})  # fmt: skip


def version_message_bytes(wire: Wire, size_bytes: int) -> int:
    """The size on the wire of one version as the service sends it (signed, sealed, packed)."""
    frames = state_frames(Model(size_bytes))
    return len(pack(wire_format.encode(wire.secret, SERVICE_OUT, (1, 0), frames)))


def wire_json(wire: Wire) -> dict[str, Any]:
    return {"secret": wire.secret.hex(), "ports": dict(wire.ports), "bind_host": wire.bind_host,
            "message_bytes": dict(wire.message_bytes), "connection_caps": dict(wire.connection_caps)}  # fmt: skip


def wire_from(raw: dict[str, Any]) -> Wire:
    return Wire(bytes.fromhex(raw["secret"]), raw["ports"], raw["bind_host"],
                message_bytes=raw["message_bytes"], connection_caps=raw["connection_caps"])  # fmt: skip


# --- the roles, each a process -------------------------------------------------------------------
class Stop:
    """Set by SIGTERM: a role ends its loop and reports."""

    def __init__(self) -> None:
        self.now = False
        signal.signal(signal.SIGTERM, self._set)

    def _set(self, *_: Any) -> None:
        self.now = True


def serve(job: dict[str, Any]) -> None:
    """The parameter service, looped as its worker shell loops it (poll, wait on its receivers)."""
    from srl.workers.params import ParamServiceKernel

    stop, transport = Stop(), TcpTransport(wire_from(job["wire"]), max_sockets=4)
    kernel = ParamServiceKernel(transport, tensor_bytes(Model(job["size_bytes"])))
    print("ready", flush=True)
    while not stop.now:
        kernel.poll()
        transport.wait(kernel.receivers, WAIT_S)
    transport.close()


def publish(job: dict[str, Any]) -> None:
    """The trainer's side: publishes version V for each line "V" on stdin, prints "V t"."""
    transport = TcpTransport(wire_from(job["wire"]), max_sockets=4)
    publisher, model = ParamPublisher(transport), Model(job["size_bytes"])
    print("ready", flush=True)
    for line in sys.stdin:
        version = int(line)
        with torch.no_grad():
            for tensor in model.weights:
                tensor.fill_(version)
        t = time.monotonic()
        publisher.publish(version, model)
        print(f"{version} {t}", flush=True)
    transport.close()


def relay(job: dict[str, Any]) -> None:
    """The relay TOPOLOGY on one host: subscribes once over tcp, republishes what it loads to a
    parameter service of its own over ipc (publisher -> service kernel, both in this process)."""
    from srl.workers.params import ParamServiceKernel

    stop, model = Stop(), Model(job["size_bytes"])
    remote = TcpTransport(wire_from(job["wire"]), max_sockets=4)
    upstream = ParamSubscriber(remote, model)
    local = local_transport(job)
    kernel = ParamServiceKernel(local, tensor_bytes(model))
    downstream = ParamPublisher(local)
    poller = zmq.Poller()  # one wait on both contexts' sockets (zmq_poll takes any context's)
    for receiver in [*upstream.receivers, *kernel.receivers]:
        poller.register(receiver.socket, zmq.POLLIN)  # type: ignore[attr-defined]
    print("ready", flush=True)
    while not stop.now:
        if upstream.poll(model):
            downstream.generation = upstream.generation
            downstream.publish(upstream.version, model)
        kernel.poll()
        poller.poll(int(WAIT_S * 1000))
    local.close()
    remote.close()


def srl_relay(job: dict[str, Any]) -> None:
    """srl's relay worker on one host: its kernel, upstream over tcp, its subscribers over ipc."""
    from srl.workers.params import ParamRelayKernel

    stop = Stop()
    remote, local = TcpTransport(wire_from(job["wire"]), max_sockets=4), local_transport(job)
    kernel = ParamRelayKernel(remote, local, tensor_bytes(Model(job["size_bytes"])))
    poller = zmq.Poller()  # one wait on both contexts' sockets
    for receiver in kernel.receivers:
        poller.register(receiver.socket, zmq.POLLIN)  # type: ignore[attr-defined]
    print("ready", flush=True)
    while not stop.now:
        if not kernel.poll():
            poller.poll(int(WAIT_S * 1000))
    local.close()
    remote.close()


def local_transport(job: dict[str, Any], max_sockets: int = 4) -> Any:
    from srl.streams.local import LocalTransport

    return LocalTransport("fanout", Path(job["ipc_dir"]), message_bytes=job["wire"]["message_bytes"],
                          max_sockets=max_sockets)  # fmt: skip


def subscribe(job: dict[str, Any]) -> None:
    """`count` subscribers in this process, polled together; prints "warm" once all hold a
    version, "done" once all hold version `last`, and at SIGTERM one JSON line: each
    subscriber's (version, t) loads."""
    stop, count, model = Stop(), job["count"], Model(job["size_bytes"])
    sockets = 2 * count + 8  # each subscriber: its SUB, and its PUSH for WANTs
    if job["ipc_dir"]:
        transport = local_transport(job, sockets)
    else:
        transport = TcpTransport(wire_from(job["wire"]), max_sockets=sockets)
    subscribers = [ParamSubscriber(transport, model) for _ in range(count)]
    loads: list[list[tuple[int, float]]] = [[] for _ in range(count)]
    poller = zmq.Poller()
    for sub in subscribers:
        poller.register(sub.receivers[0].socket, zmq.POLLIN)  # type: ignore[attr-defined]
    warm = done = False
    while not stop.now:
        poller.poll(int(WAIT_S * 1000))
        for i, sub in enumerate(subscribers):
            if sub.poll(model):
                loads[i].append((sub.version, time.monotonic()))
        if not warm and all(s.version >= 0 for s in subscribers):
            warm = True
            print("warm", flush=True)
        if not done and all(s.version >= job["last"] for s in subscribers):
            done = True
            print("done", flush=True)
    print(json.dumps({"loads": loads}), flush=True)
    transport.close()


ROLES = {"serve": serve, "publish": publish, "relay": relay, "srl_relay": srl_relay, "subscribe": subscribe}


# --- a cell ---------------------------------------------------------------------------------------
@dataclass
class Cell:
    net: str
    topology: str
    subscribers: int
    size_bytes: int
    hosts: int
    results: dict[str, Any] = field(default_factory=dict)


class Places:
    """Where a cell's processes run: this namespace (loopback) or a cluster's hosts."""

    def __init__(self, cluster: Any = None) -> None:
        self.cluster = cluster

    def service_host(self) -> str:
        return self.cluster.host("a").address if self.cluster else "127.0.0.1"

    def start(self, host: int, role: str, job: dict[str, Any]) -> subprocess.Popen:
        """Start `role` on host `host` (0: the service's; 1..: the subscribers'), `job` on its stdin."""
        argv = [sys.executable, str(Path(__file__).resolve()), "--role", role]
        pipes: dict[str, Any] = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "text": True,
                                 "env": {**os.environ, "PYTHONPATH": str(ROOT)}}  # fmt: skip
        if self.cluster:
            proc = self.cluster.spawn("abcdefghijklmnopqrstuvwxyz"[host], argv, **pipes)
        else:
            proc = subprocess.Popen(argv, start_new_session=True, **pipes)
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(job) + "\n")
        proc.stdin.flush()
        return proc

    def acked_bytes(self, port: int) -> int:
        """Bytes the connections from local port `port` sent and had acknowledged (tcp_info)."""
        argv = ["ss", "-tinH", "state", "established", f"( sport = :{port} )"]
        if self.cluster:
            argv = self.cluster.argv_on("a", argv)
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        return sum(int(n) for n in re.findall(r"bytes_acked:(\d+)", out))


def read_line(proc: subprocess.Popen, want: str, timeout_s: float) -> str:
    """The next line of `proc`'s stdout, which must start with `want`."""
    assert proc.stdout is not None
    import select

    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""
    if not line.startswith(want):
        raise RuntimeError(f"a {want!r} line was due from pid {proc.pid}, got {line!r} (its stderr: see above)")
    return line.strip()


def run_cell(cell: Cell, places: Places, versions: int, rate_hz: float, procs: list[subprocess.Popen]) -> None:
    relays = cell.topology in ("relay", "srl-relay")
    hosts = min(cell.hosts, cell.subscribers)
    connecting = hosts if relays else cell.subscribers
    wire = make_wire(places.service_host(), cell.size_bytes, connecting + 1)
    base = {"wire": wire_json(wire), "size_bytes": cell.size_bytes, "ipc_dir": ""}
    # all at once (torch's import is most of a process's start): a subscriber that connects
    # before the service listens retries, and one that comes late asks for the version (WANT)
    service = places.start(0, "serve", base)
    publisher = places.start(0, "publish", base)
    procs += [service, publisher]
    subs: list[subprocess.Popen] = []
    with contextlib.ExitStack() as dirs:
        for h in range(hosts):
            count = cell.subscribers // hosts + (h < cell.subscribers % hosts)
            job = {**base, "count": count, "last": versions}
            if relays:
                job["ipc_dir"] = dirs.enter_context(tempfile.TemporaryDirectory(prefix="srl-fanout-"))
                procs.append(places.start(1 + h, "srl_relay" if cell.topology == "srl-relay" else "relay", job))
            subs.append(places.start(1 + h, "subscribe", job))
            procs.append(subs[-1])
        for proc in procs:
            if proc not in subs:
                read_line(proc, "ready", 120)
        published: dict[int, float] = {}

        def send(version: int) -> None:
            assert publisher.stdin is not None
            publisher.stdin.write(f"{version}\n")
            publisher.stdin.flush()
            published[version] = float(read_line(publisher, str(version), 30).split()[1])

        send(0)
        for proc in subs:
            read_line(proc, "warm", 300)
        warm_s = time.monotonic() - published[0]
        # WANTs of the warm-up folded into one answer go out ANSWER_INTERVAL_S after the first
        # (srl.streams.params.WantAnswers): theirs, not the measured versions' copies
        time.sleep(ANSWER_INTERVAL_S + ACK_WAIT_S)
        acked_before = places.acked_bytes(wire.port(SERVICE_OUT))
        for version in range(1, versions + 1):
            due = published[0] if version == 1 else published[version - 1] + 1.0 / rate_hz
            time.sleep(max(0.0, due - time.monotonic()))
            send(version)
        wait_done(subs)
        time.sleep(ACK_WAIT_S)
        acked = places.acked_bytes(wire.port(SERVICE_OUT)) - acked_before  # before they disconnect
        loads = gather(subs)
        end = max(t for sub in loads for v, t in sub if v == versions) if all_have(loads, versions) else time.monotonic()
    message_bytes = version_message_bytes(wire, cell.size_bytes)
    cell.results = measure(loads, published, versions, acked, end, message_bytes)
    cell.results.update(subscriber_hosts=hosts, message_bytes=message_bytes, warm_s=round(warm_s, 3),
                        warm_copies=round(acked_before / message_bytes, 2))  # fmt: skip


def wait_done(subs: list[subprocess.Popen]) -> None:
    """Wait until every subscriber process says all its subscribers hold the last version, or
    SETTLE_TIMEOUT_S passed (a late one's loads say which versions it missed)."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    for proc in subs:
        with contextlib.suppress(RuntimeError):
            read_line(proc, "done", max(0.0, deadline - time.monotonic()))


def gather(subs: list[subprocess.Popen]) -> list[list[tuple[int, float]]]:
    """Stop the subscriber processes; each subscriber's (version, t) loads."""
    loads: list[list[tuple[int, float]]] = []
    for proc in subs:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        got = json.loads(out.strip().splitlines()[-1])["loads"]
        loads += [[(int(v), float(t)) for v, t in sub] for sub in got]
    return loads


def all_have(loads: list[list[tuple[int, float]]], version: int) -> bool:
    return all(sub and sub[-1][0] >= version for sub in loads)


def measure(loads: list[list[tuple[int, float]]], published: dict[int, float], versions: int,
            acked: int, end: float, message_bytes: int) -> dict[str, Any]:  # fmt: skip
    import statistics

    latencies = []
    for version in range(1, versions + 1):
        # the first time each subscriber held this version or a newer one
        firsts = [min((t for v, t in sub if v >= version), default=float("inf")) for sub in loads]
        if max(firsts) < float("inf"):
            latencies.append(max(firsts) - published[version])
    skipped = sum(1 for sub in loads for v in range(1, versions + 1) if v not in {w for w, _ in sub})
    seconds = max(end - published[1], 1e-9)
    return {
        "publish_to_last_s_p50": round(statistics.median(latencies), 4) if latencies else None,
        "publish_to_last_s_max": round(max(latencies), 4) if latencies else None,
        "egress_bytes_per_s": round(acked / seconds),
        "egress_bytes": acked,
        "copies_per_version": round(acked / (versions * message_bytes), 2),
        "skipped_versions": skipped,
        "all_have_last": all_have(loads, versions),
        "subscribers_heard": len(loads),
    }


def stop_all(procs: Sequence[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def places_for(net: str, hosts: int) -> Iterator[Places]:
    if net == "loopback":
        yield Places()
        return
    from srl.testing.hosts import hosts_up

    delay = re.fullmatch(r"(\d+(?:\.\d+)?)ms", net)  # a delay between hosts, links not rate-limited
    with hosts_up(hosts + 1, rate=None if delay else net, delay_ms=float(delay.group(1)) if delay else None) as cluster:
        yield Places(cluster)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    p.add_argument("--subscribers", default="1,16,128")
    p.add_argument("--sizes", default="64k,1m")
    p.add_argument("--nets", default="loopback",
                   help="loopback, link rates such as 1gbit,100mbit, or delays between hosts such as 0ms,1ms,10ms")
    p.add_argument("--topology", default="direct,relay,srl-relay",
                   help="direct, relay (the topology), srl-relay (srl's relay worker): see above")
    p.add_argument("--hosts", type=int, default=4, help="subscriber hosts (relays, through relay)")
    p.add_argument("--versions", type=int, default=5, help="versions measured per cell")
    p.add_argument("--rate-hz", type=float, default=2.0, help="versions published per second")
    p.add_argument("--max-version-bytes", type=parse_size, default=parse_size("1024m"))
    args = p.parse_args(argv)
    if args.role:
        ROLES[args.role](json.loads(sys.stdin.readline()))
        return {}
    cells, skipped = [], []
    for net in args.nets.split(","):
        with places_for(net, args.hosts) as places:
            for topology in args.topology.split(","):
                for size in [parse_size(s) for s in args.sizes.split(",")]:
                    for count in [int(n) for n in args.subscribers.split(",")]:
                        cell = Cell(net, topology, count, size, args.hosts)
                        if count * size > args.max_version_bytes:
                            skipped.append({"net": net, "topology": topology, "subscribers": count, "size_bytes": size})
                            continue
                        procs: list[subprocess.Popen] = []
                        try:
                            run_cell(cell, places, args.versions, args.rate_hz, procs)
                        finally:
                            stop_all(procs)
                        row = {"net": net, "topology": topology, "subscribers": count, "size_bytes": size,
                               **cell.results}  # fmt: skip
                        print(json.dumps(row), file=sys.stderr, flush=True)
                        cells.append(row)
    config = {k: v for k, v in vars(args).items() if k != "role"}
    return {"cells": cells, "skipped_cells": skipped, "config": config}


if __name__ == "__main__":
    result = main()
    if result:
        print(json.dumps(result))
