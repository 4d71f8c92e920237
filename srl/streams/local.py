"""One-machine backend: arrays in POSIX shared memory, signals over ZeroMQ ipc sockets.

The launcher creates every shared-memory block (`SharedBlocks`) before any worker starts and
unlinks them all at exit, whatever way the run ends; workers only attach. Messages carry slot
indices, so a signal is a 16-64 byte header and the payload never moves; only parameters and
reports carry frames. Every queue holds at most `max_queued_bytes` per peer (srl.streams.queues).
Its sockets are handled as the tcp backend's are (`ZmqTransport`, the base of both).
"""

from __future__ import annotations

import os
import re
import shutil
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from multiprocessing import shared_memory
from pathlib import Path
from typing import cast

import numpy as np
import psutil
import zmq

from srl.streams.framing import pack, packed_bytes, unpack
from srl.streams.layout import Layout
from srl.streams.queues import DEFAULT_MAX_QUEUED_BYTES, Drops, bound_socket, messages_within, newest_only
from srl.streams.transport import Message, Receiver, Sender, Transport, as_buffer, decode_header, encode_header

MAX_PARTS = 1 << 16
# sockets a process may open past those its graph declares (a test's extra receiver, a wait's
# poller adds none); ZeroMQ's own sockets (its reaper) do not count
SPARE_SOCKETS = 64
HEADER_MESSAGE_BYTES = packed_bytes(1, 8 * 64)  # a message of one header, the largest (srl.streams.transport)


class _ZmqReceiver(Receiver):
    def __init__(self, socket: zmq.Socket) -> None:
        self.socket = socket
        self._get = cast(Callable[[int], int], socket.get)  # (getsockopt adds a Python call to it: ~0.7 us, 3 sockets an actor step)

    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        out: list[Message] = []
        # Asking the socket first is a few times cheaper than a recv that raises zmq.Again, and
        # most calls on the sampling hot path (stop, parameters, releases) find nothing.
        if not self._get(zmq.EVENTS) & zmq.POLLIN:
            return out
        while len(out) < limit:
            try:
                frame = self.socket.recv(zmq.NOBLOCK)  # bytes: cheaper than a zmq.Frame when small
            except zmq.Again:
                break
            header, *frames = unpack(frame, MAX_PARTS)  # only srl's own processes reach ipc
            out.append(Message(decode_header(header), frames))
        return out


class _ZmqSender(Sender):
    def __init__(self, socket: zmq.Socket, name: str, drops: Drops) -> None:
        self.socket, self.name, self.drops = socket, name, drops

    def send(self, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()) -> None:
        # one frame (srl.streams.framing); pack copies, so the caller may overwrite its arrays at once
        self.drops.send(self.socket, pack([encode_header(header), *(as_buffer(f) for f in frames)]), self.name)


def shm_name(run_id: str, block: str) -> str:
    return f"srl_{run_id}_{block}".replace("/", "_").replace(".", "_")


class SharedBlocks:
    """Owner of a run's shared-memory blocks: created up front, unlinked exactly once."""

    def __init__(self, run_id: str, layouts: dict[str, Layout]) -> None:
        self.blocks: list[shared_memory.SharedMemory] = []
        try:
            for block, layout in layouts.items():
                self.blocks.append(
                    shared_memory.SharedMemory(shm_name(run_id, block), create=True, size=layout.nbytes)
                )
        except BaseException:
            self.unlink()
            raise

    def unlink(self) -> None:
        for shm in self.blocks:
            shm.close()
            try:
                shm.unlink()
            except FileNotFoundError:
                pass
        self.blocks.clear()


class ZmqTransport(Transport):
    """What the ZeroMQ backends share: a socket per endpoint, bounded before it binds or connects
    (srl.streams.queues), one publisher per name, every socket closed at once. A backend says how
    a stream's socket is bounded (`_bound`), where it binds or connects (`_address`; a backend may
    bind its own way, `_bind`), and how its messages are read and written (`_receiving`, `_sending`)."""

    def __init__(self, max_sockets: int = 0) -> None:
        """`max_sockets`: the most this process opens (srl.graph.Graph.sockets_per_process); the
        context is sized for it where that is past ZeroMQ's default (before its first socket:
        ZeroMQ fixes the limit then)."""
        self.context = zmq.Context()
        wanted = max_sockets + SPARE_SOCKETS
        if wanted > self.context.get(zmq.MAX_SOCKETS):
            self.context.set(zmq.MAX_SOCKETS, min(wanted, self.context.get(zmq.SOCKET_LIMIT)))
        self._drops = Drops()
        self._sockets: list[zmq.Socket] = []
        self._publishers: dict[str, Sender] = {}
        self._pollers: dict[tuple[int, ...], zmq.Poller] = {}  # one per set of receivers waited on

    @abstractmethod
    def _bound(self, socket: zmq.Socket, kind: int, name: str) -> None: ...

    @abstractmethod
    def _address(self, name: str, bind: bool) -> str: ...

    @abstractmethod
    def _receiving(self, socket: zmq.Socket, name: str) -> Receiver: ...

    @abstractmethod
    def _sending(self, socket: zmq.Socket, name: str) -> Sender: ...

    def _socket(self, kind: int, name: str) -> zmq.Socket:
        if len(self._sockets) >= self.context.get(zmq.MAX_SOCKETS):
            raise RuntimeError(
                f"stream {name!r}: this process has {len(self._sockets)} sockets open, ZeroMQ's limit for it "
                f"(zmq.MAX_SOCKETS, sized by the streams the graph declares: srl.graph.Graph.sockets_per_process); "
                "it opened more than its graph declares"
            )
        socket = self.context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        bind = kind in (zmq.PULL, zmq.PUB)
        self.opened.add((name, "bind" if bind else "connect"))
        self._bound(socket, kind, name)
        if kind == zmq.SUB:
            socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._sockets.append(socket)
        if bind:
            self._bind(socket, name)
        else:
            socket.connect(self._address(name, bind))
        return socket

    def _bind(self, socket: zmq.Socket, name: str) -> None:
        socket.bind(self._address(name, True))

    def receiver(self, name: str) -> Receiver:
        return self._receiving(self._socket(zmq.PULL, name), name)

    def sender(self, name: str) -> Sender:
        return self._sending(self._socket(zmq.PUSH, name), name)

    def publisher(self, name: str) -> Sender:
        if name not in self._publishers:
            self._publishers[name] = self._sending(self._socket(zmq.PUB, name), name)
        return self._publishers[name]

    def subscriber(self, name: str) -> Receiver:
        return self._receiving(self._socket(zmq.SUB, name), name)

    def wait(self, receivers: Sequence[Receiver], timeout_s: float) -> None:
        """Block until one receiver's socket is readable (no spinning). A worker waits on the same
        receivers every loop, so each set's poller is built once and kept."""
        key = tuple(id(r) for r in receivers)
        poller = self._pollers.get(key)
        if poller is None:
            poller = self._pollers[key] = zmq.Poller()
            for receiver in receivers:  # a zmq receiver, or a wrapper that forwards its `socket`
                poller.register(receiver.socket, zmq.POLLIN)  # type: ignore[attr-defined]
        poller.poll(max(0, int(timeout_s * 1000)))

    def take_dropped(self) -> dict[str, int]:
        return self._drops.take()

    def close(self) -> None:
        """Close every socket at once (linger 0: a stopping run drops what is unsent), then the context."""
        for socket in self._sockets:
            socket.close(linger=0)
        self._sockets.clear()
        self.context.term()


class LocalTransport(ZmqTransport):
    def __init__(self, run_id: str, ipc_dir: Path, max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
                 message_bytes: Mapping[str, int] | None = None, max_sockets: int = 0) -> None:  # fmt: skip
        super().__init__(max_sockets)
        self.run_id = run_id
        self.ipc_dir = ipc_dir
        # the streams whose messages carry more than a header (srl.graph.Graph.message_bytes); the
        # others are sized as headers, and parameters keep the newest (NEWEST_ONLY)
        self.max_queued_bytes, self.message_bytes = max_queued_bytes, message_bytes or {}
        self._shms: list[shared_memory.SharedMemory] = []

    def _bound(self, socket: zmq.Socket, kind: int, name: str) -> None:
        largest = self.message_bytes.get(name, HEADER_MESSAGE_BYTES)
        messages = None if newest_only(name) else messages_within(self.max_queued_bytes, largest)
        bound_socket(socket, messages)  # the kernel's buffers: the OS default for ipc

    def _address(self, name: str, bind: bool) -> str:
        return f"ipc://{self.ipc_dir / name}"

    def _receiving(self, socket: zmq.Socket, name: str) -> Receiver:
        return _ZmqReceiver(socket)

    def _sending(self, socket: zmq.Socket, name: str) -> Sender:
        return _ZmqSender(socket, name, self._drops)

    def arrays(self, name: str, layout: Layout) -> dict[str, np.ndarray]:
        shm = shared_memory.SharedMemory(shm_name(self.run_id, name))
        self._shms.append(shm)
        assert shm.buf is not None  # None only once closed
        return layout.views(shm.buf)

    def close(self) -> None:
        super().close()
        for shm in self._shms:
            try:
                shm.close()
            except BufferError:  # a numpy view is still alive; the OS frees the mapping at exit
                pass
        self._shms.clear()


def make_ipc_dir(run_id: str) -> Path:
    """The run's socket directory, named after this (the controller's) process, which removes it
    at exit; its workers remove it if the controller is killed (srl.launch.shell), and the next
    run's controller removes any left by a dead one (a machine's crash, say)."""
    base = Path(os.environ.get("SRL_IPC_DIR", "/tmp"))
    remove_dead_ipc_dirs(base)
    path = base / f"{IPC_PREFIX}{os.getpid()}-{run_id}"
    path.mkdir(parents=True, exist_ok=False)
    return path


IPC_PREFIX = "srl-p"  # srl-p<controller pid>-<run id>
_IPC_DIR = re.compile(re.escape(IPC_PREFIX) + r"(\d+)-")


def remove_dead_ipc_dirs(base: Path) -> list[Path]:
    """Remove this user's socket directories under `base` whose controller process is gone."""
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _IPC_DIR.match(entry.name)
        if match is None or psutil.pid_exists(int(match.group(1))):
            continue
        try:
            if not entry.is_dir() or entry.is_symlink() or entry.stat().st_uid != os.getuid():
                continue  # not ours: another user's run, or not a run's directory at all
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
