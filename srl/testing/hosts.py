"""A test cluster of hosts on one machine: each host a Linux network namespace with its own address
on a shared bridge, each link optionally rate-limited. Needs root (`ip netns`, links, `tc`).

    python -m srl.testing.hosts up --hosts 3 [--rate 100mbit] [--delay-ms 1]   # prints it as JSON, leaves it up
    ip netns exec srlh1a2b-a python ...                          # a process on host a
    python -m srl.testing.hosts down srlh1a2b                     # removes exactly what `up` made
    python -m srl.testing.hosts relay --listen 10.213.7.2:7000 --to 10.213.7.3:6379 --delay-ms 20

In Python (tests/test_hosts.py has it as a pytest fixture), everything is removed when the block
ends, by an exception or Ctrl-C too:

    with hosts_up(3, rate="100mbit") as cluster:
        proc = cluster.spawn("a", ["python", "-c", "..."])   # pid recorded; killed by down()

What it makes, per cluster: a bridge `NAMEbr` holding 10.213.X.1/24 (so this, the root
namespace, reaches every host), and per host a namespace `NAME-h` (h = a, b, c, ...) whose `eth0`
holds 10.213.X.(i+2)/24 with a default route through the bridge (Ray finds a node's own address
by the route out), joined to the bridge by the veth `NAMEvh`. NAME (`srlh` and four hex digits)
and X are picked free per cluster, under a lock, so parallel runs do not collide. Every link,
namespace and process is written to a state file (/run/srl-hosts/NAME.json) right after it is
made (with SIGINT and SIGTERM held off meanwhile), and `down` removes exactly those, by the names
and process ids it recorded (and the processes inside its own namespaces), never by a pattern.

What it shapes: `--rate` puts a token-bucket filter (`tc qdisc tbf`) on both ends of each host's
link, so each host sends and receives at most that rate. `--delay-ms D` delays every frame
between two hosts by D (a round trip by 2 D), whatever its port: the kernels we run on have no
`netem` qdisc (nor iptables), so each host's link is then a pair of TAP devices (`eth0` inside,
its root end on the bridge, jumbo frames) that a user-space forwarder joins, half the delay per
link (srl.testing.delay_link; it adds its own tens of microseconds a frame). Loss is not modelled.
`LatencyRelay` (and `relay`) delays one TCP connection it is put in front of (a port known in
advance) instead of a link.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

SUBNET_PREFIX = "10.213"  # an unusual private range: 10.213.X.0/24, X free per cluster
STATE_DIR = Path(os.environ.get("SRL_HOSTS_STATE_DIR", "/run/srl-hosts"))
MAX_HOSTS = 26  # hosts are named a..z
NAME_TRIES = 64  # random names tried before giving up (each try checks the name is unused)
IP_TIMEOUT_S = 30.0  # one `ip`/`tc` command
KILL_GRACE_S = 5.0  # SIGTERM, then this long, then SIGKILL
GONE_TIMEOUT_S = 10.0  # processes must be gone this long after SIGKILL
RATE = re.compile(r"^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit)$")  # tc's units (bits per second)
RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9}
TBF_LATENCY = "50ms"  # longest a packet may queue in the bucket before it is dropped
MAX_DELAY_MS = 1000.0
IN_ROOT = ""  # a recorded process's host when it runs in the root namespace (the delaying links' forwarder)
_FORWARDERS: list[subprocess.Popen] = []  # this process's delaying links (srl.testing.delay_link)
# frames the forwarder copies one by one, so the fewer the better: measured host to host through it
# (30 MB, one connection, no delay), 76 MB/s at an MTU of 9,000, 119 MB/s at 65,000 (under tbf's
# smallest bucket, 64 KiB)
DELAY_LINK_MTU = 65000


class HostsError(RuntimeError):
    """The cluster cannot be made here (not root, no namespaces), or an `ip` command failed."""


@dataclass
class Host:
    label: str  # "a", "b", ...
    netns: str  # its network namespace
    veth: str  # the root namespace's end of its link (on the bridge); its inside end is `eth0`
    address: str  # eth0's address


@dataclass
class Process:
    pid: int
    create_time: float  # with the pid, tells it from a later process that got the same pid
    host: str
    argv: list[str]


@dataclass
class Cluster:
    """A cluster as its state file records it: what exists is what is listed here."""

    name: str
    subnet: str  # "10.213.X"
    bridge: str | None = None
    gateway: str = ""  # the bridge's address, 10.213.X.1
    rate: str | None = None
    delay_ms: float | None = None  # one-way delay between two hosts, added in user space (srl.testing.delay_link)
    workdir: str | None = None  # /tmp/NAME: a folder for the cluster's processes (Ray's temp dirs)
    hosts: list[Host] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # root ends made (a veth's removes both; a TAP's the namespace takes)
    namespaces: list[str] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)

    # --- the state file ---------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return STATE_DIR / f"{self.name}.json"

    def save(self) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(self.state_path)

    @classmethod
    def load(cls, name: str) -> Cluster:
        path = STATE_DIR / f"{name}.json"
        if not path.exists():
            raise HostsError(f"no cluster {name!r}: {path} does not exist (clusters: {', '.join(names()) or 'none'})")
        raw = json.loads(path.read_text())
        raw["hosts"] = [Host(**h) for h in raw["hosts"]]
        raw["processes"] = [Process(**p) for p in raw["processes"]]
        return cls(**raw)

    def host(self, label: str) -> Host:
        for h in self.hosts:
            if h.label == label:
                return h
        raise KeyError(f"no host {label!r} in cluster {self.name} (hosts: {', '.join(h.label for h in self.hosts)})")

    # --- processes on the hosts ---------------------------------------------------------------------
    def argv_on(self, label: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.host(label).netns, *argv]

    def spawn(self, label: str, argv: Sequence[str], **popen: Any) -> subprocess.Popen:
        """Start `argv` on host `label` (`ip netns exec` execs it: the pid is argv's own), in a
        session of its own, and record it so that `down` stops it. Not under `held_signals`: a
        child inherits the signal mask, and would ignore `down`'s SIGTERM; one interrupted before
        it is recorded is still stopped, as a process inside the cluster's namespace."""
        proc = subprocess.Popen(self.argv_on(label, argv), start_new_session=True, **popen)
        self.processes.append(Process(proc.pid, _create_time(proc.pid), label, list(argv)))
        self.save()
        return proc

    def pids(self, label: str) -> list[int]:
        """Every process in host `label`'s namespace (whoever started it)."""
        out = _ip("netns", "pids", self.host(label).netns, check=False)
        return [int(p) for p in out.split()]

    def kill_host(self, label: str, sig: int = signal.SIGKILL) -> list[int]:
        """Send `sig` to every process of host `label` at once, as a machine that dies; their pids."""
        victims = self.pids(label)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return victims

    def set_link(self, label: str, up: bool) -> None:
        """Cut (up=False) or restore host `label`'s link to the bridge (its veth's root end)."""
        _ip("link", "set", self.host(label).veth, "up" if up else "down")

    def set_rate(self, label: str, rate: str | None) -> None:
        """Shape host `label`'s link to `rate` (tc's units: "1gbit", "100mbit"), or unshape it
        (None): a benchmark measures several rates on one cluster, whose Ray takes a minute to start."""
        host = self.host(label)
        if rate is not None and not RATE.match(rate):
            raise HostsError(f"rate {rate!r}: a number and bit, kbit, mbit or gbit, e.g. 100mbit")
        _tc("qdisc", "del", "dev", host.veth, "root", check=False)
        _tc("-n", host.netns, "qdisc", "del", "dev", "eth0", "root", check=False)
        if rate is not None:
            _shape(host, rate)

    def set_delay(self, delay_ms: float) -> None:
        """Change the delay between hosts of a cluster made with one (`up(..., delay_ms=...)`):
        its forwarder is started again with the new one (the TAPs stay; frames in flight
        meanwhile are lost, and TCP sends them again). A benchmark measures several delays on one
        cluster, whose Ray takes a minute to start."""
        if self.delay_ms is None:
            raise HostsError(f"cluster {self.name} was made without a delay: its links are veths, which nothing here delays")
        check_can_make(len(self.hosts), self.rate, delay_ms)
        for rec in [p for p in self.processes if p.host == IN_ROOT]:
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(rec.pid)
                if abs(proc.create_time() - rec.create_time) < 0.01:
                    proc.terminate()
                    proc.wait(GONE_TIMEOUT_S)
            with held_signals():
                self.processes.remove(rec)
                self.save()
        self.delay_ms = delay_ms
        self.save()
        _start_delay_links(self)

    def link_bytes(self, label: str) -> int:
        """Bytes through host `label`'s link so far, both directions (its veth's counters)."""
        stats = Path("/sys/class/net") / self.host(label).veth / "statistics"
        return int((stats / "tx_bytes").read_text()) + int((stats / "rx_bytes").read_text())

    # --- teardown -----------------------------------------------------------------------------------
    def down(self) -> None:
        """Remove everything this cluster made: its processes (those it started, and any process
        inside its namespaces), links, namespaces, bridge, folder, state file; each as it goes, so
        an interrupted `down` can be run again."""
        self._stop_processes()
        for link in list(self.links):
            _ip("link", "del", link, check=False)
            self.links.remove(link)
            self.save()
        for netns in list(self.namespaces):
            _ip("netns", "del", netns, check=False)
            self.namespaces.remove(netns)
            self.save()
        if self.bridge:
            _ip("link", "del", self.bridge, check=False)
            self.bridge = None
            self.save()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
        self.state_path.unlink(missing_ok=True)

    def _stop_processes(self) -> None:
        """SIGTERM, a grace period, then SIGKILL: recorded processes and everything inside our
        namespaces (Ray's raylet starts workers there; they are ours by where they run)."""
        for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, GONE_TIMEOUT_S)):
            alive = self._ours()
            for proc in alive:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
            _, still = psutil.wait_procs(alive, timeout=wait_s)
            if not still and not self._ours():
                break
        left = self._ours()
        if left:
            raise HostsError(f"cluster {self.name}: processes still running after SIGKILL: {[p.pid for p in left]}")
        self.processes.clear()
        self.save()

    def _ours(self) -> list[psutil.Process]:
        procs: dict[int, psutil.Process] = {}
        for rec in self.processes:
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(rec.pid)
                if abs(proc.create_time() - rec.create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE:
                    procs[rec.pid] = proc
        for netns in self.namespaces:
            for pid in _ip("netns", "pids", netns, check=False).split():
                with contextlib.suppress(psutil.Error):
                    proc = psutil.Process(int(pid))
                    if proc.status() != psutil.STATUS_ZOMBIE:
                        procs[proc.pid] = proc
        return list(procs.values())


# --- making a cluster --------------------------------------------------------------------------------
def up(num_hosts: int, rate: str | None = None, delay_ms: float | None = None) -> Cluster:
    """Make a cluster of `num_hosts` hosts (HostsError, with everything made so far removed, if
    it cannot be made). See the module's docstring for what it makes."""
    check_can_make(num_hosts, rate, delay_ms)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with _lock():  # two clusters made at once pick different names and subnets
        cluster = Cluster(name=_free_name(), subnet=_free_subnet(), rate=rate, delay_ms=delay_ms)
        cluster.gateway = f"{cluster.subnet}.1"
        cluster.save()
    try:
        _make(cluster, num_hosts)
    except BaseException:
        cluster.down()
        raise
    return cluster


@contextlib.contextmanager
def hosts_up(num_hosts: int, rate: str | None = None, delay_ms: float | None = None) -> Iterator[Cluster]:
    """`up`, and `down` when the block ends however it ends (an exception, Ctrl-C)."""
    cluster = up(num_hosts, rate, delay_ms)
    try:
        yield cluster
    finally:
        cluster.down()


def check_can_make(num_hosts: int, rate: str | None, delay_ms: float | None = None) -> None:
    if not 1 <= num_hosts <= MAX_HOSTS:
        raise HostsError(f"--hosts must be 1..{MAX_HOSTS}, got {num_hosts}")
    if delay_ms is not None and not 0 <= delay_ms <= MAX_DELAY_MS:
        raise HostsError(f"--delay-ms must be 0..{MAX_DELAY_MS:g} (milliseconds between two hosts), got {delay_ms:g}")
    if rate is not None and not RATE.match(rate):
        raise HostsError(f"--rate must be a number and a unit (bit, kbit, mbit, gbit), e.g. 100mbit; got {rate!r}")
    if os.geteuid() != 0:
        raise HostsError("a cluster of network namespaces needs root (ip netns, links, tc): run it as root")
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        raise HostsError(f"a cluster of network namespaces needs iproute2's {' and '.join(missing)}: not found on PATH")
    if not Path("/proc/self/ns/net").exists():
        raise HostsError("this kernel has no network namespaces (/proc/self/ns/net is missing)")
    if delay_ms is not None and not Path("/dev/net/tun").exists():
        raise HostsError("--delay-ms joins TAP devices, and this machine has none (/dev/net/tun is missing)")


def _make(cluster: Cluster, num_hosts: int) -> None:
    bridge = f"{cluster.name}br"
    with held_signals():
        _ip("link", "add", bridge, "type", "bridge")
        cluster.bridge = bridge
        cluster.save()
    _ip("addr", "add", f"{cluster.gateway}/24", "dev", bridge)
    _ip("link", "set", bridge, "up")
    with held_signals():
        workdir = Path("/tmp") / cluster.name
        workdir.mkdir(mode=0o700)
        cluster.workdir = str(workdir)
        cluster.save()
    for i in range(num_hosts):
        label = chr(ord("a") + i)
        host = Host(label, f"{cluster.name}-{label}", f"{cluster.name}v{label}", f"{cluster.subnet}.{i + 2}")
        with held_signals():
            _ip("netns", "add", host.netns)
            cluster.namespaces.append(host.netns)
            cluster.save()
        with held_signals():
            if cluster.delay_ms is None:
                _ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns)
            else:  # two TAPs that srl.testing.delay_link joins, once every host has its pair
                _ip("-n", host.netns, "tuntap", "add", "dev", "eth0", "mode", "tap")
                _ip("tuntap", "add", "dev", host.veth, "mode", "tap")
            cluster.links.append(host.veth)
            cluster.save()
        cluster.hosts.append(host)
        cluster.save()
    if cluster.delay_ms is not None:
        _start_delay_links(cluster)
    for host in cluster.hosts:
        _configure(cluster, host, bridge)


def _configure(cluster: Cluster, host: Host, bridge: str) -> None:
    """Host `host`'s link on the bridge, its address, its route out, its shaping."""
    if cluster.delay_ms is not None:  # frames the forwarder copies one by one: fewer, larger ones
        _ip("link", "set", host.veth, "mtu", str(DELAY_LINK_MTU))
        _ip("-n", host.netns, "link", "set", "eth0", "mtu", str(DELAY_LINK_MTU))
    _ip("link", "set", host.veth, "master", bridge)
    _ip("link", "set", host.veth, "up")
    inside = ["-n", host.netns]
    _ip(*inside, "link", "set", "lo", "up")
    _ip(*inside, "addr", "add", f"{host.address}/24", "dev", "eth0")
    _ip(*inside, "link", "set", "eth0", "up")
    _ip(*inside, "route", "add", "default", "via", cluster.gateway)
    if cluster.rate:
        _shape(host, cluster.rate)


def _start_delay_links(cluster: Cluster) -> None:
    """The forwarder that joins each host's two TAPs with the cluster's delay, in this (the root)
    namespace, recorded like the hosts' processes so that `down` stops it."""
    from srl.testing import delay_link

    links = [f"{h.netns}:eth0={h.veth}" for h in cluster.hosts]
    argv = [sys.executable, delay_link.__file__, "--delay-ms", str(cluster.delay_ms), *links]
    errors = Path(str(cluster.workdir)) / "delay_link.err"
    with errors.open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    _FORWARDERS.append(proc)  # a Popen dropped while its process runs warns; `down` ends it by pid
    with held_signals():
        cluster.processes.append(Process(proc.pid, _create_time(proc.pid), IN_ROOT, argv))
        cluster.save()
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "ready" once every TAP is attached, "" if it failed
    proc.stdout.close()
    if line.strip() != "ready":
        proc.wait(timeout=IP_TIMEOUT_S)
        raise HostsError(f"the delaying links did not start: {errors.read_text().strip()[-2000:]}")


def _shape(host: Host, rate: str) -> None:
    """A token bucket at `rate` on each end of the host's link: what the host sends (eth0) and
    what it receives (the root end). The bucket holds 10 ms of traffic (at least 64 KiB)."""
    found = RATE.match(rate)
    assert found is not None  # checked in check_can_make
    bits_per_s = float(found.group(1)) * RATE_UNITS[found.group(2)]
    burst_bytes = max(int(bits_per_s / 8 / 100), 64 * 1024)
    tbf = ["root", "tbf", "rate", rate, "burst", str(burst_bytes), "latency", TBF_LATENCY]
    _tc("qdisc", "add", "dev", host.veth, *tbf)
    _tc("-n", host.netns, "qdisc", "add", "dev", "eth0", *tbf)


def _free_name() -> str:
    taken = set(_ip("-o", "link", "show", check=False).split()) | set(_ip("netns", "list", check=False).split())
    for _ in range(NAME_TRIES):
        name = f"srlh{secrets.token_hex(2)}"
        if not any(name in word for word in taken) and not (STATE_DIR / f"{name}.json").exists():
            return name
    raise HostsError(f"no free cluster name after {NAME_TRIES} tries")


def _free_subnet() -> str:
    """10.213.X with X used by no address or route here nor by another cluster's state file."""
    used = _ip("-4", "addr", "show", check=False) + _ip("-4", "route", "show", check=False)
    for path in STATE_DIR.glob("*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            used += " " + json.loads(path.read_text())["subnet"] + "."
    for x in range(1, 255):
        if f"{SUBNET_PREFIX}.{x}." not in used:
            return f"{SUBNET_PREFIX}.{x}"
    raise HostsError(f"no free subnet {SUBNET_PREFIX}.X.0/24 left")


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    with open(STATE_DIR / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends: a thing made is also recorded (in the main
    thread only; elsewhere the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _ip(*args: str, check: bool = True) -> str:
    return _run(["ip", *args], check)


def _tc(*args: str, check: bool = True) -> str:
    return _run(["tc", *args], check)


def _run(argv: list[str], check: bool) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise HostsError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def _create_time(pid: int) -> float:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0  # already gone: never matches a live process


def names() -> list[str]:
    return sorted(p.stem for p in STATE_DIR.glob("srlh*.json"))


# --- the latency relay ---------------------------------------------------------------------------------
class LatencyRelay:
    """A TCP relay that forwards each chunk it reads `delay_ms` later, in order, both ways: a fixed
    one-way delay on the connections made to it (netem's `delay`, for the one port it fronts).

        relay = LatencyRelay(("10.213.7.2", 7000), ("10.213.7.3", 6379), delay_ms=20).start()
        ...                                       # connect to 10.213.7.2:7000
        relay.stop()

    It runs its own event loop in a thread; `serve()` runs it in the foreground instead. Bandwidth
    is not limited (use `--rate`), nor is anything lost or reordered."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int], delay_ms: float) -> None:
        self.listen, self.target, self.delay_s = listen, target, delay_ms / 1000
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self.address: tuple[str, int] | None = None  # where it listens (the port, if 0 was asked)

    def start(self, timeout_s: float = 10.0) -> LatencyRelay:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True, name="latency-relay")
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise HostsError(f"the relay did not start listening on {self.listen} within {timeout_s:g} s")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)

    def serve(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._connection, *self.listen)
        self.address = server.sockets[0].getsockname()[:2]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _connection(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            target_r, target_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(self._pipe(client_r, target_w), self._pipe(target_r, client_w))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read as it comes; each chunk is written `delay_s` after it was read (a queue keeps them
        in order), so a stream of chunks is delayed, not slowed."""
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due_s, chunk = await queue.get()
                await asyncio.sleep(max(0.0, due_s - time.monotonic()))
                if not chunk:
                    break
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while True:
                chunk = await reader.read(65536)
                queue.put_nowait((time.monotonic() + self.delay_s, chunk))
                if not chunk:
                    break
            await sender
        except (ConnectionError, OSError):
            sender.cancel()
        finally:
            writer.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


# --- the command line ------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m srl.testing.hosts", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("up", help="make a cluster; print it as JSON (its name is what `down` takes)")
    make.add_argument("--hosts", type=int, default=3, help=f"how many hosts (1..{MAX_HOSTS})")
    make.add_argument("--rate", default=None, help="each host's link rate both ways (tc tbf), e.g. 100mbit")
    make.add_argument("--delay-ms", type=float, default=None,
                      help="one-way delay between two hosts, added by a user-space forwarder (srl.testing.delay_link)")
    remove = sub.add_parser("down", help="remove a cluster: everything its state file lists")
    remove.add_argument("name", help="the cluster's name (`up` printed it; `list` lists them)")
    sub.add_parser("list", help="the clusters whose state files exist")
    relay = sub.add_parser("relay", help="a TCP relay that delays what it forwards (there is no netem here)")
    relay.add_argument("--listen", type=_address, required=True, help="HOST:PORT to listen on")
    relay.add_argument("--to", type=_address, required=True, help="HOST:PORT to forward to")
    relay.add_argument("--delay-ms", type=float, required=True, help="one-way delay added to each chunk")
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            cluster = up(args.hosts, args.rate, args.delay_ms)
            print(json.dumps(asdict(cluster), indent=2), file=out)
        elif args.command == "down":
            if os.geteuid() != 0:
                raise HostsError("removing a cluster of network namespaces needs root: run it as root")
            Cluster.load(args.name).down()
        elif args.command == "list":
            print("\n".join(names()), file=out)
        else:
            LatencyRelay(args.listen, args.to, args.delay_ms).serve()
    except HostsError as e:
        print(f"srl.testing.hosts: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
