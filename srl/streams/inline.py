"""In-process backend: queues and plain memory. Every worker shares one `InlineTransport`."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from srl.streams.layout import Layout
from srl.streams.transport import Message, Receiver, Sender, Transport


def _own(frames: Sequence[bytes | memoryview | np.ndarray]) -> list[bytes]:
    # Copy, as a socket would: the sender may overwrite its buffer right after sending.
    return [f if isinstance(f, bytes) else np.ascontiguousarray(f).tobytes() for f in frames]


class _Queue(Receiver, Sender):
    def __init__(self) -> None:
        self.messages: deque[Message] = deque()

    def send(self, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()) -> None:
        self.messages.append(Message(tuple(int(h) for h in header), _own(frames)))

    def recv_all(self, limit: int = 1 << 30) -> list[Message]:
        out: list[Message] = []
        while self.messages and len(out) < limit:
            out.append(self.messages.popleft())
        return out


class _Publisher(Sender):
    def __init__(self) -> None:
        self.subscribers: list[_Queue] = []

    def send(self, header: Sequence[int], frames: Sequence[bytes | memoryview | np.ndarray] = ()) -> None:
        frames = _own(frames)
        for queue in self.subscribers:
            queue.send(header, frames)


class InlineTransport(Transport):
    def __init__(self) -> None:
        self._queues: dict[str, _Queue] = {}
        self._publishers: dict[str, _Publisher] = {}
        self._blocks: dict[str, bytearray] = {}

    def receiver(self, name: str) -> Receiver:
        return self._queues.setdefault(name, _Queue())

    def sender(self, name: str) -> Sender:
        return self._queues.setdefault(name, _Queue())

    def publisher(self, name: str) -> Sender:
        return self._publishers.setdefault(name, _Publisher())

    def subscriber(self, name: str) -> Receiver:
        queue = _Queue()
        self._publishers.setdefault(name, _Publisher()).subscribers.append(queue)
        return queue

    def arrays(self, name: str, layout: Layout) -> dict[str, np.ndarray]:
        if name not in self._blocks:
            self._blocks[name] = bytearray(layout.nbytes)
        return layout.views(self._blocks[name])

    def wait(self, receivers: Sequence[Receiver], timeout_s: float) -> None:
        """Nothing to wait for in one process: the inline scheduler polls every worker in turn."""
