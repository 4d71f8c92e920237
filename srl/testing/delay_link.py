"""Link latency in user space, for a cluster of namespace hosts (srl.testing.hosts): this kernel
has no `netem` and no iptables, and srl's ports are chosen after placement, so no relay can be put
in front of them in advance. Instead each host's link is a pair of TAP devices, `eth0` inside its
namespace and its root end on the bridge, and this forwarder copies every Ethernet frame from one
to the other after `delay_ms / 2`: a frame between two hosts crosses two links, so the one-way
delay between hosts is `delay_ms` and a round trip 2 x `delay_ms`, whatever the protocol or port
(Ray's own traffic too). It adds its own cost on top (a Python process copying every frame: tens
of microseconds a frame, more on a loaded machine); it never reorders, and drops a frame only
where a device refuses it (a link set down, a full queue), as a cable would.

    python -m srl.testing.delay_link --delay-ms 1 NETNS:eth0=ROOTTAP [...]   # started by `hosts up --delay-ms`
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import functools
import heapq
import itertools
import os
import select
import struct
import sys
import time
from collections.abc import Callable, Sequence

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI = 0x0002, 0x1000
CLONE_NEWNET = 0x40000000
PR_SET_TIMERSLACK = 29
MAX_FRAME = 65536
READS_PER_WAKE = 64  # frames read from one device before the others get a turn
TIMER_SLACK_NS = 1_000  # the kernel's default 50 us would round every sub-ms wait up
NETNS_DIR = "/run/netns"  # where `ip netns add` names its namespaces


def open_tap(name: str) -> int:
    """Attach to the existing TAP device `name` in this thread's network namespace."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def in_netns(netns: str, action: Callable[[], int]) -> int:
    """`action()` run inside network namespace `netns`, then back in this one (setns: Python 3.11's
    os has none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(os.path.join(NETNS_DIR, netns), os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into network namespace {netns}")
        try:
            return action()
        finally:
            if libc.setns(home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back into this process's network namespace")
    finally:
        os.close(home)
        os.close(target)


class DelayLinks:
    """Frames read from either end of a link are written to the other end `delay_s` later."""

    def __init__(self, pairs: Sequence[tuple[int, int]], delay_s: float) -> None:
        self.peer = {a: b for a, b in pairs} | {b: a for a, b in pairs}
        self.delay_s = delay_s
        self.pending: list[tuple[float, int, int, bytes]] = []  # (due, sequence, device, frame): a heap
        self.sequence = itertools.count()  # keeps frames due at the same moment in arrival order
        self.dropped = 0
        self.stopping = False

    def serve(self) -> None:
        """Until a device goes away; SIGTERM (the default action) ends it at any point: it holds
        nothing but the devices' descriptors."""
        devices = list(self.peer)
        while not self.stopping:
            wait_s = None if not self.pending else max(0.0, self.pending[0][0] - time.monotonic())
            try:
                readable, _, _ = select.select(devices, [], [], wait_s)  # microseconds, unlike epoll's milliseconds
            except InterruptedError:
                continue
            for device in readable:
                self._read(device)
            self._send_due()

    def _read(self, device: int) -> None:
        due_s = time.monotonic() + self.delay_s
        for _ in range(READS_PER_WAKE):
            try:
                frame = os.read(device, MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # the device went away (the cluster is coming down)
                self.stopping = True
                return
            heapq.heappush(self.pending, (due_s, next(self.sequence), self.peer[device], frame))

    def _send_due(self) -> None:
        now = time.monotonic()
        while self.pending and self.pending[0][0] <= now:
            _, _, device, frame = heapq.heappop(self.pending)
            try:
                os.write(device, frame)
            except OSError:  # link down, or its queue full: the frame is lost, as on a wire
                self.dropped += 1


def parse_link(text: str) -> tuple[str, str, str]:
    """NETNS:INSIDE=ROOT -> (netns, the TAP inside it, the TAP in this namespace)."""
    inside, _, root = text.partition("=")
    netns, _, device = inside.partition(":")
    if not (netns and device and root):
        raise argparse.ArgumentTypeError(f"expected NETNS:TAP=ROOTTAP, got {text!r}")
    return netns, device, root


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srl.testing.delay_link", description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay between two hosts (half per link)")
    parser.add_argument("links", nargs="+", type=parse_link, help="NETNS:TAP=ROOTTAP, one per host")
    args = parser.parse_args(argv)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)
    pairs = [(in_netns(netns, functools.partial(open_tap, device)), open_tap(root)) for netns, device, root in args.links]
    links = DelayLinks(pairs, args.delay_ms / 2000)
    print("ready", flush=True)
    try:
        links.serve()
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
