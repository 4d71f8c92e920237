"""How often a conflating ZeroMQ pipe holds the newest message back until the next write.

srl's parameter stream keeps only the newest message per peer (ZeroMQ's CONFLATE). libzmq's
conflating pipe is a double buffer whose writer swaps a message in only if the reader is not
reading at that instant; otherwise the message waits, unseen, for the next write. Outside lock
step the next version is that write; in lock step nothing more is written until the reader has
this one, which is why srl.streams.params asks again (WANT, and the trainer's republish).

This sends pairs of messages back to back over ipc (PUSH and PULL, both conflating, as the
parameter service's sockets are) to a reader that spins on ZMQ_EVENTS (as a waiting actor does),
and counts the pairs whose second message the reader did not see within `--wait-s`.

    python benchmarks/conflate_holdback.py --pairs 100000

Prints one JSON line: {"pairs", "held_back", "held_back_per_100k", "wall_s"}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import zmq


def _reader(address: str, acks: str) -> None:
    """Forward every message it sees to `acks`, until b"end"."""
    context = zmq.Context()
    inbox = context.socket(zmq.PULL)
    inbox.setsockopt(zmq.CONFLATE, 1)
    inbox.bind(address)
    out = context.socket(zmq.PUSH)
    out.connect(acks)
    while True:
        if inbox.getsockopt(zmq.EVENTS) & zmq.POLLIN:
            message = inbox.recv(zmq.NOBLOCK)
            out.send(message)
            if message == b"end":
                return


def measure(pairs: int, wait_s: float) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="srl-conflate-")
    address, acks = f"ipc://{folder}/pipe", f"ipc://{folder}/acks"
    child = os.fork()
    if child == 0:
        try:
            _reader(address, acks)
        finally:
            os._exit(0)
    context = zmq.Context()
    out = context.socket(zmq.PUSH)
    out.setsockopt(zmq.CONFLATE, 1)
    out.connect(address)
    seen = context.socket(zmq.PULL)
    seen.bind(acks)
    time.sleep(0.5)  # both connected
    held_back, started = 0, time.perf_counter()
    for i in range(pairs):
        newest = b"%d" % i
        out.send(b"older")
        out.send(newest)
        while True:
            if not seen.poll(int(wait_s * 1000)):
                held_back += 1
                out.send(newest)  # the next write releases it
            elif seen.recv() == newest:
                break
    wall_s = time.perf_counter() - started
    out.send(b"end")
    while seen.recv() != b"end":
        pass
    os.waitpid(child, 0)
    context.destroy(linger=0)
    shutil.rmtree(folder, ignore_errors=True)
    return {"pairs": pairs, "held_back": held_back, "held_back_per_100k": round(held_back * 1e5 / pairs, 2),
            "wall_s": round(wall_s, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--wait-s", type=float, default=0.2, help="unseen this long after its write: held back")
    args = ap.parse_args()
    print(json.dumps(measure(args.pairs, args.wait_s)))


if __name__ == "__main__":
    main()
