"""What a tcp listener of srl lets in, and who holds it: every stream's receiver or publisher on
dataflow.transport=tcp (srl.streams.tcp) and the trainers' rendezvous (srl.streams.rendezvous).

- **Who holds it.** The listening socket is made here and handed to ZeroMQ by its descriptor
  (`USE_FD`), so every process forked later closes it (`os.register_at_fork`): a worker that the
  local launcher restarts is forked from the controller, and holds none of its listeners.
- **How long a silent peer stays.** A connection that has not completed ZeroMQ's handshake within
  `HANDSHAKE_IVL_MS` is closed (ZeroMQ's default is 30 s; measured on 31d188e: 3,000 silent
  connections held 3,000 of the controller's descriptors for about 35 s).
- **How many stay.** At most a cap of connections at once per listener (`connection_cap`: twice
  the workers that connect to the stream, and `CONNECTIONS_SPARE` more). ZeroMQ has no such limit,
  so a thread reads each listener's socket events (`ConnectionCap`): it counts the connections
  accepted and ended, and shuts down each one accepted past the cap at once (its peer's ZeroMQ
  connects again later; a stranger's connection is gone). Refused connections are counted and
  logged, one line per stream every LOG_EVERY_S. Measured (tests/test_listeners.py, cartpole-ppo
  over tcp, 3 workers): 2,000 silent connections raised the controller's open files by 1,366 on
  31d188e, by 70 now (its two listeners' room), each refused a moment after ZeroMQ accepts it.

The descriptors are close-on-exec too (Python's default), so a program a worker executes
(subprocess) holds none either.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field

import zmq
from zmq.utils.monitor import parse_monitor_message

from srl.streams.rejections import Tally

log = logging.getLogger(__name__)
WILDCARDS = ("0.0.0.0", "::", "*")
# a handshake takes a round trip or two (well under 10 ms on loopback, even on a loaded 2-vCPU
# VM); one that fails costs a legitimate peer nothing but a reconnect, its messages stay queued
HANDSHAKE_IVL_MS = 5_000
# connections a listener keeps beyond twice its workers': srl's tests, a tool that subscribes
CONNECTIONS_SPARE = 32
BACKLOG = 100  # ZeroMQ's own (ZMQ_BACKLOG)
POLL_MS = 100  # how often the cap's thread looks at its stop flag and at new listeners
# A restarted worker binds its predecessor's ports: the predecessor may still be exiting (a Ray
# actor's kill is waited for 10 s at most), so a port in use is tried again for this long
BIND_RETRY_S = 5.0
TCP_STATES = {"01": "ESTABLISHED", "02": "SYN_SENT", "06": "TIME_WAIT", "08": "CLOSE_WAIT", "0A": "LISTEN"}

_LISTENING: set[int] = set()  # descriptors of this process's listening sockets


def _close_listening_in_child() -> None:
    """In a forked child: no ZeroMQ thread serves the parent's listeners there, and nobody may
    accept on them."""
    for fd in _LISTENING:
        try:
            os.close(fd)
        except OSError:
            pass
    _LISTENING.clear()


os.register_at_fork(after_in_child=_close_listening_in_child)


def connection_cap(connecting_workers: int) -> int:
    """The cap of a listener that `connecting_workers` workers connect to: each once, a restarted
    one again before its predecessor's connection is seen to end, and CONNECTIONS_SPARE more."""
    return 2 * connecting_workers + CONNECTIONS_SPARE


def bind_endpoint(host: str, port: int) -> str:
    """Where a socket binds to listen on `host` only (every interface for a wildcard)."""
    return f"tcp://{bracket('*' if host in WILDCARDS else host)}:{port}"


def bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def listen(host: str, port: int = 0) -> tuple[int, int]:
    """A socket listening on `host` (only) and `port` (0: one the OS picks): its descriptor, which
    forked children close, and its port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    deadline = time.monotonic() + BIND_RETRY_S
    while True:
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            # as ZeroMQ's own: a restarted worker binds its streams' ports again while its dead
            # predecessor's connections are in TIME_WAIT
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("" if host in WILDCARDS else host, port))
            listener.listen(BACKLOG)
            port = listener.getsockname()[1]
            break
        except OSError as error:
            listener.close()
            if error.errno != errno.EADDRINUSE or not port:
                raise
            if time.monotonic() > deadline:
                raise OSError(error.errno, f"port {port} on {host}, chosen for this stream when the run was placed, "
                              f"is in use ({holders(port) or 'by no socket this namespace shows'})") from None
            time.sleep(0.1)
    fd = listener.detach()  # ZeroMQ owns it once bound, and closes it with its socket
    _LISTENING.add(fd)
    return fd, port


def holders(port: int) -> str:
    """What holds local `port` in this network namespace, from /proc/net/tcp and tcp6: e.g.
    "ESTABLISHED to 10.213.7.2:6379; LISTEN" (a bind that fails says what took its port)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.rsplit(":", 1)[1], 16) == port:
                name = TCP_STATES.get(state, f"state {state}")
                found.append(name if name == "LISTEN" else f"{name} to {_address(remote)}")
    return "; ".join(found)


def _address(hex_address: str) -> str:
    """/proc/net/tcp's IPv4 "0100007F:1A0B" as 127.0.0.1:6667 (IPv6: its port alone)."""
    ip, port = hex_address.rsplit(":", 1)
    if len(ip) == 8:
        return f"{socket.inet_ntoa(bytes.fromhex(ip)[::-1])}:{int(port, 16)}"
    return f"port {int(port, 16)}"


def forget(fd: int) -> None:
    """Before its ZeroMQ socket closes `fd`: a later fork must not close whatever reuses the number."""
    _LISTENING.discard(fd)


class Refusals(Tally):
    def refuse(self, stream: str, cap: int) -> None:
        since = self._count(stream, 1)
        if since is not None:
            log.warning("stream %s: refused %d connection(s) past its cap of %d since the last line, %d in all",
                        stream, since, cap, self.total[stream])


@dataclass
class _Listener:
    name: str
    port: int
    cap: int
    events: zmq.Socket  # the PAIR that receives the listening socket's events
    open: set[int] = field(default_factory=set)  # descriptors of its connections, accepted and not ended


class ConnectionCap:
    """At most each listener's cap of connections at once (see the module doc); one thread for
    every listener of a ZeroMQ context."""

    def __init__(self, context: zmq.Context) -> None:
        self.context = context
        self.refusals = Refusals()
        self._listeners: list[_Listener] = []
        self._lock = threading.Lock()  # the thread reads the list the owner adds to
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def bind(self, sock: zmq.Socket, name: str, host: str, port: int, cap: int) -> tuple[int, int]:
        """Bind `sock` to listen on host:port (0: any) through a descriptor of our own, its events
        watched from the first connection on; its descriptor and port."""
        fd, port = listen(host, port)
        events = None
        try:
            events = self._watch(sock, fd)
            sock.setsockopt(zmq.USE_FD, fd)
            sock.bind(bind_endpoint(host, port))  # takes over the descriptor
        except BaseException:
            if events is not None:  # an open socket would hang its context's end
                sock.disable_monitor()
                events.close(linger=0)
            forget(fd)
            os.close(fd)
            raise
        with self._lock:
            self._listeners.append(_Listener(name, port, cap, events))
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="srl-connections", daemon=True)
            self._thread.start()
        return fd, port

    def _watch(self, sock: zmq.Socket, fd: int) -> zmq.Socket:
        address = f"inproc://srl-connections-{fd}-{id(sock)}"
        sock.monitor(address, zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        events = self.context.socket(zmq.PAIR)
        events.setsockopt(zmq.LINGER, 0)
        # no bound on the events queued (ZeroMQ drops a monitor's events past it): a lost
        # DISCONNECTED would hold a slot for ever, a lost ACCEPTED let a connection past the cap
        events.setsockopt(zmq.RCVHWM, 0)
        events.connect(address)  # before the bind: no event is sent before it is connected
        return events

    def open_connections(self) -> dict[str, int]:
        """Connections each listener holds now, by stream (as the thread last counted)."""
        with self._lock:
            return {listener.name: len(listener.open) for listener in self._listeners}

    def close(self) -> None:
        """Stop the thread and close the event sockets (before their context terminates)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for listener in self._listeners:
                listener.events.close(linger=0)
            self._listeners.clear()

    def _serve(self) -> None:
        poller, polled = zmq.Poller(), 0
        while not self._stop.is_set():
            with self._lock:
                listeners = list(self._listeners)
            for listener in listeners[polled:]:  # bound since the last look
                poller.register(listener.events, zmq.POLLIN)
            polled = len(listeners)
            ready = dict(poller.poll(POLL_MS))
            for listener in listeners:
                if listener.events in ready:
                    try:
                        self._take_events(listener)
                    except Exception:  # a fault of this code: the listeners' other protections hold
                        log.exception("stream %s: its connections could not be counted", listener.name)

    def _take_events(self, listener: _Listener) -> None:
        while True:
            try:
                event = parse_monitor_message(listener.events.recv_multipart(zmq.NOBLOCK))
            except zmq.Again:
                return
            fd = int(event["value"])
            with self._lock:
                if event["event"] == zmq.EVENT_DISCONNECTED:
                    listener.open.discard(fd)
                    continue
                listener.open.add(fd)  # until its end is seen: it holds a descriptor till then
                past_cap = len(listener.open) > listener.cap
            if past_cap:
                _shut_down(fd, listener.port)
                self.refusals.refuse(listener.name, listener.cap)


def _shut_down(fd: int, port: int) -> None:
    """End the connection on descriptor `fd` if it is still one that the listener on `port`
    accepted (ZeroMQ may have closed it since, and the number gone to another). It is shut down,
    not closed: ZeroMQ reads its end, and closes its descriptor itself."""
    try:
        duplicate = os.dup(fd)
    except OSError:  # closed since
        return
    try:
        copy = socket.socket(fileno=duplicate)
    except OSError:  # no socket now
        os.close(duplicate)
        return
    with copy:
        try:
            if copy.family in (socket.AF_INET, socket.AF_INET6) and copy.getsockname()[1] == port:
                copy.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
