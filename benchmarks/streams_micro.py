"""Per-stream microbenchmark of every transport backend: inline, shm (local) and tcp.

Two measurements, each through the real stream classes with a no-op on the far side:

- inference round trip: `InferenceClient.request` -> `InferenceServer.poll/reply` -> `ready`,
  slot of `--rows` x `--obs-dim` float32 observations (CartPole-sized by default); median us.
- samples: `SampleProducer.send` -> `SampleConsumer.poll/release` -> `acquire`, segments of
  `--segment-kib` KiB with `--slots` in flight; messages/s and MB/s of segment handed over. On
  shm the segment never moves (the message names a slot), so its MB/s is what the trainer could
  read, not bytes copied; on tcp every byte crosses the socket (plus one copy into each end).

The far side is another process for shm and tcp (forked, as the local launcher does), the same
process for inline. Prints one JSON line of medians over `--repeats` runs.

    PYTHONPATH=. python benchmarks/streams_micro.py [--repeats 3] [--seconds 2]
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import multiprocessing as mp
import os
import platform
import secrets
import shutil
import statistics
import time

import numpy as np

from srl.config.load import load_config
from srl.graph import build_graph, sub_arrays
from srl.streams.inference import InferenceClient, InferenceServer
from srl.streams.inline import InlineTransport
from srl.streams.layout import ArraySpec, Layout
from srl.streams.local import LocalTransport, SharedBlocks, make_ipc_dir
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.streams.tcp import TcpTransport, Wire
from srl.streams.tcp_setup import free_ports
from srl.streams.wire import Limits

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)


def layout(rows: int, obs_dim: int, segment_bytes: int, slots: int) -> Layout:
    arrays = {
        "infer.0.obs": ArraySpec((rows, obs_dim), F32),
        "infer.0.action": ArraySpec((rows,), I64),
        "infer.0.value": ArraySpec((rows,), F32),
        "infer.0.version": ArraySpec((1,), I64),
    }
    for k in range(slots):
        arrays[f"sample.0.{k}.obs"] = ArraySpec((segment_bytes // 4,), F32)
    return Layout(arrays)


def transport_streams(actors: int = 1) -> list[str]:
    """The names the tcp backend gives ports to, as the graph declares them for `actors` actors
    and one policy worker (the streams this bench, and benchmarks/ingest.py, open are among them)."""
    config = load_config("cartpole-ppo", ["dataflow.inference=policy_worker", f"launch.num_actor_workers={actors}",
                                          "launch.num_policy_workers=1", "dataflow.transport=tcp"])
    return [s.name for s in build_graph(config).streams if s.via == "transport"]


class Backend:
    """Makes the transport of one more endpoint of a run, in this process or a forked child;
    over tcp, with the ports of `actors` actors' streams and a secret of its own, as a run's."""

    def __init__(self, kind: str, blocks: Layout, actors: int = 1) -> None:
        self.kind, self.blocks = kind, blocks
        self.run_id = "bench" + secrets.token_hex(3)
        self.inline = InlineTransport() if kind == "inline" else None
        self.ipc_dir = make_ipc_dir(self.run_id) if kind == "shm" else None
        self.shm = SharedBlocks(self.run_id, {"actor0": blocks}) if kind == "shm" else None
        if kind == "tcp":
            names = transport_streams(actors)
            ports = dict(zip(names, free_ports("127.0.0.1", len(names))))
            limits = Limits(max_frames=8, max_frame_bytes=max(s.nbytes for s in blocks.arrays.values()))
            self.wire = Wire(secrets.token_bytes(32), ports, limits=limits)

    def transport(self):
        if self.kind == "inline":
            return self.inline
        return LocalTransport(self.run_id, self.ipc_dir) if self.kind == "shm" else TcpTransport(self.wire)

    def close(self) -> None:
        if self.shm is not None:
            self.shm.unlink()
            shutil.rmtree(self.ipc_dir, ignore_errors=True)


def far_side(backend: Backend, stop, ready) -> None:
    """The policy worker and trainer, doing nothing but answering and releasing."""
    transport = backend.transport()
    arrays = transport.arrays("actor0", backend.blocks)
    server = InferenceServer(transport, 0, [0], slots={(0, 0): sub_arrays(arrays, "infer.0.")})
    consumer = SampleConsumer(
        transport, {(0, 0, k): sub_arrays(arrays, f"sample.0.{k}.") for k in slot_ids(arrays)}
    )
    ready.set()
    while not stop.is_set():
        served = far_side_step(server, consumer)
        if not served and transport is not backend.inline:
            transport.wait(server.receivers + consumer.receivers, 0.05)
    if transport is not backend.inline:
        transport.close()


def far_side_step(server, consumer) -> int:
    requests = server.poll(limit=64)
    server.reply(requests)
    refs = consumer.poll(limit=64)
    for ref in refs:
        consumer.release(ref)
    return len(requests) + len(refs)


def slot_ids(arrays) -> list[int]:
    return sorted({int(name.split(".")[2]) for name in arrays if name.startswith("sample.")})


def measure(kind: str, args) -> dict:
    blocks = layout(args.rows, args.obs_dim, args.segment_kib << 10, args.slots)
    backend = Backend(kind, blocks)
    stop, ready = mp.get_context("fork").Event(), mp.get_context("fork").Event()
    child = None
    try:
        if kind == "inline":
            far = InlineFar(backend)
        else:
            child = mp.get_context("fork").Process(target=far_side, args=(backend, stop, ready), daemon=True)
            child.start()
            ready.wait(10)
            far = None
        transport = backend.transport()
        arrays = transport.arrays("actor0", blocks)
        client = InferenceClient(transport, 0, 0, slots=[sub_arrays(arrays, "infer.0.")])
        producer = SampleProducer(
            transport, 0, {(0, k): sub_arrays(arrays, f"sample.0.{k}.") for k in slot_ids(arrays)}
        )
        rtt = round_trips(client, transport, far, args.seconds / 2)
        rate = hand_overs(producer, transport, far, args.seconds / 2)
        if transport is not backend.inline:
            transport.close()
        return {"rtt_us_median": round(statistics.median(rtt) * 1e6, 1), "msgs_per_s": round(rate),
                "mb_per_s": round(rate * (args.segment_kib << 10) / 1e6, 1)}  # fmt: skip
    finally:
        stop.set()
        if child is not None:
            child.join(5)
            if child.is_alive():
                child.kill()
        backend.close()


class InlineFar:
    def __init__(self, backend: Backend) -> None:
        self.arrays = backend.inline.arrays("actor0", backend.blocks)
        t = backend.inline
        self.server = InferenceServer(t, 0, [0], slots={(0, 0): sub_arrays(self.arrays, "infer.0.")})
        self.consumer = SampleConsumer(
            t, {(0, 0, k): sub_arrays(self.arrays, f"sample.0.{k}.") for k in slot_ids(self.arrays)}
        )

    def step(self) -> None:
        far_side_step(self.server, self.consumer)


def round_trips(client, transport, far, seconds: float) -> list[float]:
    out, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(out) < 10:
        started = time.perf_counter()
        client.request(0, key=len(out) + 1)  # a new key each time: the server drops a request it has taken
        while True:
            if far is not None:
                far.step()
            if client.ready():
                break
            transport.wait(client.receivers, 1.0)
        out.append(time.perf_counter() - started)
    return out


def hand_overs(producer, transport, far, seconds: float) -> float:
    sent, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        slot = producer.acquire(0)
        if slot is None:
            if far is not None:
                far.step()
            else:
                transport.wait(producer.receivers, 1.0)
            continue
        producer.send(0, slot)
        sent += 1
    return sent / (time.perf_counter() - started)


def hmac_mb_per_s(nbytes: int, seconds: float = 0.5) -> float:
    """The tcp backend's signing cost (each message is hashed once by each end), for scale."""
    data, key, done, started = os.urandom(nbytes), os.urandom(32), 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        hmac.new(key, data, hashlib.sha256).digest()
        done += 1
    return round(done * nbytes / (time.perf_counter() - started) / 1e6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="per backend and repeat, both measurements"
    )
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--obs-dim", type=int, default=4)
    parser.add_argument("--segment-kib", type=int, default=256)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--backends", nargs="+", default=["inline", "shm", "tcp"])
    args = parser.parse_args()
    load = os.getloadavg()
    runs = {kind: [] for kind in args.backends}
    for _ in range(args.repeats):  # backends interleaved, so drift in the machine's load hits each alike
        for kind in args.backends:
            runs[kind].append(measure(kind, args))
    result = {
        kind: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for kind, rs in runs.items()
    }
    print(json.dumps({
        "benchmark": "streams_micro", "repeats": args.repeats, "seconds": args.seconds,
        "slot": f"{args.rows}x{args.obs_dim} float32 obs", "segment_kib": args.segment_kib, "slots": args.slots,
        "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(), "loadavg_at_start": load,
        "hmac_sha256_mb_per_s": hmac_mb_per_s(args.segment_kib << 10), "backends": result,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
