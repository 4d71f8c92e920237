"""What one trainer and one policy worker take in over tcp, by observation size, and where the
receiving process's time goes: signing (HMAC), the wire's other checks, copying, everything else.

Over tcp every byte a worker receives is verified (HMAC-SHA256 in srl.streams.wire) and copied
into its own slot (srl.streams.schema.fill_slot), in the worker's own loop; what it sends back
(a release, a reply) is signed and packed (one more copy) there too. This measures how many env
steps a second that leaves one process, through the real stream classes and a run's secret:

- trainer: `--feeders` forked processes, each an actor's `SampleProducer`, send segments of
  `--segment-steps` x `--rows` env steps as fast as their slots come back; this process is the
  trainer's `SampleConsumer` (poll, release) and does nothing else.
- policy: each feeder is an actor's `InferenceClient` with `--splits` splits of `--rows` envs,
  asking again as soon as a reply comes; this process is the `InferenceServer` (poll, reply)
  with no forward pass.

Observations are uint8 of `--obs-bytes` per env step (16 B: CartPole-ish; 1 KiB: a small image;
28 KiB: Atari's 84x84x4). Each size and side runs twice in a row: a plain window for the rates,
then a window with timers around the wire's functions for the split (the timers add a few us a
message, so their window is not used for rates). The time split counts only the time this process
was not waiting for messages (`busy_share` says how much that was); `cpu_per_wall` is the
process's CPU (its ZeroMQ I/O thread included) over wall time, and `env_steps_per_cpu_s` is what
one core would take in if the process had it to itself. Prints one JSON line.

    PYTHONPATH=. python benchmarks/ingest.py [--sizes 16 1024 28672] [--seconds 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from streams_micro import Backend, hmac_mb_per_s  # noqa: E402  (the tcp set-up of a run, shared)

from srl.graph import sub_arrays  # noqa: E402
from srl.streams import framing, schema, tcp, wire  # noqa: E402
from srl.streams.inference import InferenceClient, InferenceServer  # noqa: E402
from srl.streams.layout import ArraySpec, Layout  # noqa: E402
from srl.streams.samples import SampleConsumer, SampleProducer  # noqa: E402

U8, I64, F32 = np.dtype(np.uint8), np.dtype(np.int64), np.dtype(np.float32)
SIDES = ("trainer", "policy")
CATEGORIES = ("hmac", "integrity", "copy")  # and "other": the rest of the busy time


def sample_layout(obs_bytes: int, steps: int, rows: int, slots: int) -> Layout:
    """An actor's segment slots: what a trainer receives (obs, action, reward, done per step)."""
    arrays = {}
    for k in range(slots):
        arrays[f"sample.{k}.obs"] = ArraySpec((steps, rows, obs_bytes), U8)
        arrays[f"sample.{k}.action"] = ArraySpec((steps, rows), I64)
        arrays[f"sample.{k}.reward"] = ArraySpec((steps, rows), F32)
        arrays[f"sample.{k}.done"] = ArraySpec((steps, rows), U8)
    return Layout(arrays)


def inference_layout(obs_bytes: int, rows: int, splits: int) -> Layout:
    """An actor's inference slots: obs in the request; action, value, version in the reply."""
    arrays = {}
    for s in range(splits):
        arrays[f"infer.{s}.obs"] = ArraySpec((rows, obs_bytes), U8)
        arrays[f"infer.{s}.action"] = ArraySpec((rows,), I64)
        arrays[f"infer.{s}.value"] = ArraySpec((rows,), F32)
        arrays[f"infer.{s}.version"] = ArraySpec((1,), I64)
    return Layout(arrays)


def slots_of(arrays: dict[str, np.ndarray], kind: str) -> list[int]:
    return sorted({int(name.split(".")[1]) for name in arrays if name.startswith(kind + ".")})


def feed(backend: Backend, side: str, actor: int, stop, ready) -> None:
    """One actor, sending as fast as the measured side lets it (no env: its arrays hold noise)."""
    transport = backend.transport()
    arrays = transport.arrays(f"actor{actor}", backend.blocks)
    rng = np.random.default_rng(actor)
    for a in arrays.values():
        a.reshape(-1).view(np.uint8)[:] = rng.integers(0, 256, a.nbytes, np.uint8)
    if side == "trainer":
        producer = SampleProducer(transport, actor, {(0, k): sub_arrays(arrays, f"sample.{k}.") for k in slots_of(arrays, "sample")})
        ready.set()
        while not stop.is_set():
            slot = producer.acquire(0)
            if slot is None:
                transport.wait(producer.receivers, 0.05)
            else:
                producer.send(0, slot)
    else:
        splits = slots_of(arrays, "infer")
        client = InferenceClient(transport, actor, 0, slots=[sub_arrays(arrays, f"infer.{s}.") for s in splits])
        key = 0
        for s in splits:
            key += 1
            client.request(s, key=key)
        ready.set()
        while not stop.is_set():
            answered = client.ready()
            for s in answered:  # a new key each time: the server drops a request it has taken
                key += 1
                client.request(s, key=key)
            if not answered:
                transport.wait(client.receivers, 0.05)
    transport.close()


class Timers:
    """Exclusive time per category: a wrapped call nested in another (the MAC inside `decode`)
    counts for its own category only."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(CATEGORIES, 0.0)
        self._stack: list[float] = []  # time spent in wrapped calls nested in the open ones

    def wrap(self, fn: Callable, category: str) -> Callable:
        def timed(*args, **kwargs):
            self._stack.append(0.0)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - started
                nested = self._stack.pop()
                self.seconds[category] += elapsed - nested
                if self._stack:
                    self._stack[-1] += elapsed

        return timed


@contextmanager
def timed_wire(timers: Timers) -> Iterator[None]:
    """Timers around the wire's work in this process, where the tcp backend calls it."""
    targets = [
        (wire, "mac", "hmac"),  # signing and verifying: decode and encode call it by module global
        (tcp, "decode", "integrity"), (tcp, "encode", "integrity"),  # shape checks, seal, header
        (tcp, "unpack", "integrity"), (wire.Freshness, "check", "integrity"),  # framing, replay checks
        (schema.Schema, "check", "integrity"),  # header fields and frame sizes against the slot
        (schema, "fill_slot", "copy"), (tcp, "pack", "copy"),  # frames into the slot; parts into one frame
    ]  # fmt: skip
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    assert tcp.pack is framing.pack and schema.fill_slot is wire.fill_slot, "the tcp backend's call sites moved"
    try:
        for owner, name, category in targets:
            setattr(owner, name, timers.wrap(getattr(owner, name), category))
        yield
    finally:
        for owner, name, fn in originals:
            setattr(owner, name, fn)


class Measured:
    """This process's side: a trainer's consumer or a policy worker's server, of every feeder."""

    def __init__(self, backend: Backend, side: str, feeders: int, steps_per_message: int) -> None:
        self.transport = backend.transport()
        self.side, self.steps_per_message = side, steps_per_message
        blocks = {a: self.transport.arrays(f"actor{a}", backend.blocks) for a in range(feeders)}
        if side == "trainer":
            self.consumer = SampleConsumer(self.transport, {
                (a, 0, k): sub_arrays(arrays, f"sample.{k}.") for a, arrays in blocks.items() for k in slots_of(arrays, "sample")
            })  # fmt: skip
            self.receivers = self.consumer.receivers
        else:
            self.server = InferenceServer(self.transport, 0, list(blocks), slots={
                (a, s): sub_arrays(arrays, f"infer.{s}.") for a, arrays in blocks.items() for s in slots_of(arrays, "infer")
            })  # fmt: skip
            self.receivers = self.server.receivers

    def step(self) -> int:
        if self.side == "trainer":
            refs = self.consumer.poll(limit=64)
            for ref in refs:
                self.consumer.release(ref)
            return len(refs)
        requests = self.server.poll(limit=64)
        self.server.reply(requests)
        return len(requests)

    def window(self, seconds: float) -> dict:
        messages, idle_s = 0, 0.0
        cpu0, started = time.process_time(), time.perf_counter()
        while (now := time.perf_counter()) - started < seconds:
            got = self.step()
            messages += got
            if not got:
                self.transport.wait(self.receivers, 0.05)
                idle_s += time.perf_counter() - now
        wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu0
        return {"wall_s": wall_s, "busy_s": wall_s - idle_s, "cpu_s": cpu_s, "messages": messages}


def measure(side: str, obs_bytes: int, args) -> dict:
    if side == "trainer":
        blocks = sample_layout(obs_bytes, args.segment_steps, args.rows, args.slots)
        steps_per_message = args.segment_steps * args.rows
        received_bytes = blocks.nbytes // args.slots  # a segment: every array of its slot
    else:
        blocks, steps_per_message = inference_layout(obs_bytes, args.rows, args.splits), args.rows
        received_bytes = args.rows * obs_bytes  # a request: the observations
    backend = Backend("tcp", blocks, actors=args.feeders)
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    readies = [ctx.Event() for _ in range(args.feeders)]
    feeders = [ctx.Process(target=feed, args=(backend, side, a, stop, readies[a]), daemon=True) for a in range(args.feeders)]
    measured = None
    try:
        measured = Measured(backend, side, args.feeders, steps_per_message)  # listens before the feeders connect
        for p in feeders:
            p.start()
        for r in readies:
            r.wait(30)
        measured.window(min(0.5, args.seconds / 4))  # connections made, queues filled
        plain = measured.window(args.seconds)
        timers = Timers()
        with timed_wire(timers):
            split = measured.window(args.seconds)
        return figures(plain, split, timers, steps_per_message, received_bytes)
    finally:
        stop.set()
        for p in feeders:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        if measured is not None:
            measured.transport.close()
        backend.close()


def figures(plain: dict, split: dict, timers: Timers, steps_per_message: int, message_bytes: int) -> dict:
    steps = plain["messages"] * steps_per_message
    shares = {c: timers.seconds[c] / split["busy_s"] for c in CATEGORIES} if split["busy_s"] > 0 else dict.fromkeys(CATEGORIES, 0.0)
    shares["other"] = 1.0 - sum(shares.values())
    return {
        "env_steps_per_s": round(steps / plain["wall_s"]),
        "messages_per_s": round(plain["messages"] / plain["wall_s"], 1),
        "mb_per_s": round(plain["messages"] * message_bytes / plain["wall_s"] / 1e6, 1),
        "busy_share": round(plain["busy_s"] / plain["wall_s"], 3),
        "cpu_per_wall": round(plain["cpu_s"] / plain["wall_s"], 3),
        "env_steps_per_cpu_s": round(steps / plain["cpu_s"]) if plain["cpu_s"] > 0 else None,
        "env_steps_per_busy_s": round(steps / plain["busy_s"]) if plain["busy_s"] > 0 else None,
        "shares": {k: round(v, 3) for k, v in shares.items()},
        "timed_window_env_steps_per_s": round(split["messages"] * steps_per_message / split["wall_s"]),  # the timers' cost
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 1024, 28672], help="observation bytes per env step")
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    parser.add_argument("--seconds", type=float, default=3.0, help="per window (a plain one, a timed one)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--feeders", type=int, default=2, help="actor processes feeding the measured side")
    parser.add_argument("--rows", type=int, default=4, help="envs per split: env steps per request, per segment step (atari: 8 envs, 2 splits)")
    parser.add_argument("--segment-steps", type=int, default=128, help="as srl.experiments.atari")
    parser.add_argument("--slots", type=int, default=2, help="segment slots per feeder")
    parser.add_argument("--splits", type=int, default=2, help="inference splits per feeder")
    args = parser.parse_args()
    load = os.getloadavg()
    runs: dict[str, dict[str, list[dict]]] = {s: {str(b): [] for b in args.sizes} for s in args.sides}
    for _ in range(args.repeats):  # interleaved, so drift in the machine's load hits each alike
        for side in args.sides:
            for obs_bytes in args.sizes:
                runs[side][str(obs_bytes)].append(measure(side, obs_bytes, args))
    result = {side: {size: median_run(rs) for size, rs in sizes.items()} for side, sizes in runs.items()}
    print(json.dumps({
        "benchmark": "ingest", "transport": "tcp", "repeats": args.repeats, "seconds": args.seconds,
        "feeders": args.feeders, "rows": args.rows, "segment_steps": args.segment_steps, "slots": args.slots,
        "splits": args.splits, "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(),
        "loadavg_at_start": [round(x, 2) for x in load], "hmac_sha256_mb_per_s": hmac_mb_per_s(1 << 20, 0.3),
        "by_obs_bytes": result,
    }))  # fmt: skip


def median_run(runs: list[dict]) -> dict:
    """The run of median rate, whole (its split belongs to it), and every run's rate."""
    ordered = sorted(runs, key=lambda r: r["env_steps_per_s"])
    return {**ordered[(len(ordered) - 1) // 2], "runs_env_steps_per_s": [r["env_steps_per_s"] for r in runs],
            "median_env_steps_per_s": statistics.median(r["env_steps_per_s"] for r in runs)}  # fmt: skip


if __name__ == "__main__":
    main()
