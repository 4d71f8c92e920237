"""The trainers' rendezvous: a small key-value store served by the controller, where the trainers
of a `num_trainers>1` run form their torch.distributed group (srl.streams.gradients).

    trainer: RendezvousClient (a torch.distributed.Store), DEALER --request--> controller:
             RendezvousServer, ROUTER on bind_host, served by a thread <--reply--

It replaces torch's TCPStore, whose server listens on every interface whatever host it is given,
takes requests from anyone, and holds a listening socket that every worker forked later inherits:
- the listening socket is bound to the run's `bind_host` only (loopback unless the run says
  otherwise; under Ray, the controller node's address);
- every request is signed with a secret the launcher makes for the run (srl.streams.wire, stream
  `REQUESTS`) and sealed; the server takes a sender's requests only in rising sequence and while
  fresh (`wire.Freshness`), so a recorded request sent again is refused. Every refused request
  (junk, forged, replayed, or signed but malformed) is dropped and counted (`take_rejected`, in
  the run's `rejected_messages`);
- every reply is signed too (stream `REPLIES`) and carries the MAC of the request it answers, so
  a trainer takes no reply recorded earlier or meant for another request;
- its listening socket is made as every tcp stream's (srl.streams.listeners): closed in every
  process forked from the controller (no worker holds it), a silent peer's connection closed after
  a few seconds, and its connections capped.

A blocking call (`get`, `wait`) is answered once its keys exist; a trainer that gives up (its
timeout) leaves the pending answer to expire on the server.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch.distributed as dist
import zmq

from srl.streams.framing import FramingError, pack, unpack
from srl.streams.listeners import HANDSHAKE_IVL_MS, ConnectionCap, bind_endpoint, connection_cap, forget
from srl.streams.rejections import Rejections
from srl.streams.wire import Freshness, Limits, Sealed, Sealer, WireError, decode, encode

log = logging.getLogger(__name__)
REQUESTS, REPLIES = "rendezvous.requests", "rendezvous.replies"  # the streams whose keys sign them
# gloo and NCCL exchange addresses and ids of a few hundred bytes; a wait names a key or a few
LIMITS = Limits(max_frames=16, max_frame_bytes=1 << 20)
SET, GET, ADD, COMPARE_SET, WAIT, CHECK, DELETE, NUM_KEYS = range(8)
OP_NAMES = ("set", "get", "add", "compare_set", "wait", "check", "delete_key", "num_keys")
_KEY_FRAMES = {SET: (2, 2), GET: (1, 1), ADD: (1, 1), COMPARE_SET: (3, 3), WAIT: (1, LIMITS.max_frames),
               CHECK: (1, LIMITS.max_frames), DELETE: (1, 1), NUM_KEYS: (0, 0)}  # op -> fewest, most frames
MAX_WAIT_S = 3600.0  # a pending answer never outlives this, whatever the request asked
POLL_MS = 100  # how often the serving thread looks at its stop flag and expired waits

@dataclass(frozen=True)
class Request:
    op: int
    number: int  # add's amount
    timeout_ms: int  # how long a blocking call's sender waits for the answer
    frames: list[bytes]  # keys (and values) as bytes
    mac: bytes  # what the reply echoes

    @classmethod
    def parse(cls, sealed: Sealed, mac: bytes) -> Request:
        header = sealed.message.header
        if len(header) != 3 or header[0] not in _KEY_FRAMES:
            raise WireError(f"not a rendezvous request: header {header}")
        fewest, most = _KEY_FRAMES[header[0]]
        if not fewest <= len(sealed.message.frames) <= most:
            raise WireError(f"{OP_NAMES[header[0]]} with {len(sealed.message.frames)} frames")
        return cls(header[0], header[1], header[2], [bytes(f) for f in sealed.message.frames], mac)


class KeyValues:
    """The store's content and its answers, with TCPStore's meaning of each call. `answer`
    returns (number, frames) for the reply, or None while a blocking call's keys are missing."""

    def __init__(self) -> None:
        self.values: dict[bytes, bytes] = {}

    def answer(self, r: Request) -> tuple[int, list[bytes]] | None:
        if r.op == SET:
            self.values[r.frames[0]] = r.frames[1]
        elif r.op == GET:
            return None if r.frames[0] not in self.values else (0, [self.values[r.frames[0]]])
        elif r.op == ADD:
            try:
                total = int(self.values.get(r.frames[0], b"0")) + r.number
            except ValueError:
                raise WireError(f"add to key {r.frames[0]!r}, whose value is not an integer") from None
            self.values[r.frames[0]] = str(total).encode()
            return total, []
        elif r.op == COMPARE_SET:
            return 0, [self._compare_set(*r.frames)]
        elif r.op == WAIT:
            return None if not self._has(r.frames) else (0, [])
        elif r.op == CHECK:
            return int(self._has(r.frames)), []
        elif r.op == DELETE:
            return int(self.values.pop(r.frames[0], None) is not None), []
        elif r.op == NUM_KEYS:
            return len(self.values), []
        return 0, []

    def _has(self, keys: Sequence[bytes]) -> bool:
        return all(k in self.values for k in keys)

    def _compare_set(self, key: bytes, expected: bytes, desired: bytes) -> bytes:
        current = self.values.get(key)
        if (current is None and expected == b"") or (current is not None and current == expected):
            self.values[key] = desired
            return desired
        return expected if current is None else current


@dataclass
class _Pending:
    identity: bytes
    request: Request
    deadline_s: float  # monotonic


class RendezvousServer:
    """The controller's side: a thread answering signed requests on `host` (a port the OS picks)."""

    def __init__(self, host: str, secret: bytes, world_size: int = 1) -> None:
        self.secret = secret
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.MAXMSGSIZE, LIMITS.max_message_bytes)
        self.socket.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_IVL_MS)
        # its connections capped: the group's trainers connect (srl.streams.listeners)
        self.connections = ConnectionCap(self.context)
        self.fd, self.port = self.connections.bind(self.socket, REQUESTS, host, 0, connection_cap(world_size))
        self.store = KeyValues()
        self.pending: list[_Pending] = []  # blocking calls whose keys are missing
        self.freshness, self.sealer = Freshness(LIMITS.max_age_s), Sealer()
        self.rejections = Rejections()  # requests dropped (counted and logged as a stream's are)
        self._lock = threading.Lock()  # the serving thread rejects, the controller takes
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="srl-rendezvous", daemon=True)
        self._thread.start()

    def take_rejected(self) -> dict[str, int]:
        """Requests dropped since the last call (the controller's own `rejected_messages`)."""
        with self._lock:
            return self.rejections.take()

    def close(self) -> None:
        forget(self.fd)
        self._stop.set()
        self._thread.join(timeout=5)
        self.connections.close()
        self.socket.close()
        self.context.term()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if self.socket.poll(POLL_MS):
                while True:
                    try:
                        frames = self.socket.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    try:
                        self._handle(frames)
                    except Exception:  # a fault of this code: the trainers must not lose their store
                        log.exception("rendezvous: a request could not be answered")
            now = time.monotonic()
            self.pending = [p for p in self.pending if p.deadline_s > now]

    def _handle(self, frames: list[zmq.Frame]) -> None:
        try:
            if len(frames) != 2:  # ROUTER adds the sender's identity; srl sends one frame
                raise FramingError(f"a message of {len(frames) - 1} frames; srl sends one")
            parts = unpack(frames[1].buffer, LIMITS.max_frames + 3)
            sealed = decode(self.secret, REQUESTS, parts, LIMITS)
            request = Request.parse(sealed, bytes(parts[0]))
            self.freshness.check(sealed)
            self._answer(frames[0].bytes, request)
        except (FramingError, WireError) as error:
            self._reject(error)

    def _answer(self, identity: bytes, request: Request, deadline_s: float | None = None) -> None:
        answer = self.store.answer(request)
        if answer is None:
            if deadline_s is None:
                deadline_s = time.monotonic() + min(max(request.timeout_ms, 0) / 1000, MAX_WAIT_S)
            self.pending.append(_Pending(identity, request, deadline_s))
            return
        self._reply(identity, request, *answer)
        if request.op in (SET, ADD, COMPARE_SET):  # keys may have appeared: answer who waits
            waiting, self.pending = self.pending, []
            for p in waiting:
                self._answer(p.identity, p.request, p.deadline_s)

    def _reply(self, identity: bytes, request: Request, number: int, frames: list[bytes]) -> None:
        parts = encode(self.secret, REPLIES, (number,), [request.mac, *frames], self.sealer.next())
        self.socket.send_multipart([identity, pack(parts)])

    def _reject(self, error: Exception) -> None:
        with self._lock:
            self.rejections.reject(REQUESTS, error)


class RendezvousClient(dist.Store):
    """A trainer's side: the store torch.distributed forms its group through. Each call sends
    one signed request and waits (the store's timeout) for the reply that names it."""

    def __init__(self, host: str, port: int, secret: bytes, timeout_s: float) -> None:
        super().__init__()
        self.set_timeout(datetime.timedelta(seconds=timeout_s))
        self.where, self.secret = f"{host}:{port}", secret
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.MAXMSGSIZE, LIMITS.max_message_bytes)
        self._socket.connect(bind_endpoint(host, port))  # trainers are given no wildcard (srl.launch.local)
        self._sealer = Sealer()
        self._lock = threading.Lock()  # torch may call a store from its own threads

    def set(self, key: str, value: bytes | str) -> None:
        self._call(SET, [key, value])

    def get(self, key: str) -> bytes:
        return bytes(self._call(GET, [key]).message.frames[1])

    def add(self, key: str, amount: int) -> int:
        return self._call(ADD, [key], number=amount).message.header[0]

    def compare_set(self, key: str, expected: bytes | str, desired: bytes | str) -> bytes:
        return bytes(self._call(COMPARE_SET, [key, expected, desired]).message.frames[1])

    def wait(self, keys: list[str], timeout: datetime.timedelta | None = None) -> None:
        self._call(WAIT, keys, timeout=timeout)

    def check(self, keys: list[str]) -> bool:
        return bool(self._call(CHECK, keys).message.header[0])

    def delete_key(self, key: str) -> bool:
        return bool(self._call(DELETE, [key]).message.header[0])

    def num_keys(self) -> int:
        return self._call(NUM_KEYS, []).message.header[0]

    def close(self) -> None:
        self._socket.close()
        self._context.term()

    def _call(self, op: int, frames: Sequence[bytes | str], number: int = 0,
              timeout: datetime.timedelta | None = None) -> Sealed:  # fmt: skip
        timeout_s = (timeout or self.timeout).total_seconds()  # type: ignore[attr-defined]  # a Store property torch's stubs lack
        data = [f.encode() if isinstance(f, str) else bytes(f) for f in frames]
        with self._lock:
            header = (op, number, int(timeout_s * 1000))
            parts = encode(self.secret, REQUESTS, header, data, self._sealer.next())
            self._socket.send(pack(parts))
            deadline_s = time.monotonic() + timeout_s
            while (left_s := deadline_s - time.monotonic()) > 0 and self._socket.poll(int(left_s * 1000) + 1):
                reply = self._reply_to(bytes(parts[0]), self._socket.recv(copy=False))
                if reply is not None:
                    return reply
        raise dist.DistStoreError(f"rendezvous at {self.where}: no answer to {OP_NAMES[op]} "
                                  f"{[f.decode(errors='replace') for f in data[:1]]} within {timeout_s:g} s")

    def _reply_to(self, request_mac: bytes, frame: zmq.Frame) -> Sealed | None:
        """The reply to the request signed `request_mac`, or None: a late answer to an earlier
        request, or (logged) one not signed by the server. A request's MAC covers its unique
        seal, so a reply recorded for another request is never taken for this one."""
        try:
            sealed = decode(self.secret, REPLIES, unpack(frame.buffer, LIMITS.max_frames + 3), LIMITS)
        except (FramingError, WireError) as error:
            log.warning("rendezvous at %s: dropped a reply: %s", self.where, error)
            return None
        frames = sealed.message.frames
        return sealed if frames and bytes(frames[0]) == request_mac else None
