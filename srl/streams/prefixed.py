"""A policy lane's view of its process's transport (srl.graph.lanes): the lane's workers and the shared
actors' parts for it open the lane's streams and blocks, whose names carry its prefix, while the
stream code names them as in a one-policy run. Everything else is the process's transport.

`RenamedTransport` renames some streams only: a subscriber served by its host's parameter relay
opens the relay's params.in/params.out where the stream code says params.in/params.out."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from srl.streams.incarnations import INCARNATIONS_BLOCK
from srl.streams.layout import Layout
from srl.streams.transport import Receiver, Sender, Transport


class PrefixedTransport(Transport):
    def __init__(self, inner: Transport, prefix: str) -> None:
        self.inner, self.prefix = inner, prefix
        self.shares_memory = inner.shares_memory
        # the process's own: what a lane's receivers drop, and the endpoints it opens, count there
        self.rejections, self.opened = inner.rejections, inner.opened

    def rename(self, name: str) -> str:
        return self.prefix + name

    def receiver(self, name: str) -> Receiver:
        return self.inner.receiver(self.rename(name))

    def sender(self, name: str) -> Sender:
        return self.inner.sender(self.rename(name))

    def publisher(self, name: str) -> Sender:
        return self.inner.publisher(self.rename(name))

    def subscriber(self, name: str) -> Receiver:
        return self.inner.subscriber(self.rename(name))

    def arrays(self, name: str, layout: Layout) -> dict[str, np.ndarray]:
        # the workers' epochs are the run's, one block for every lane
        return self.inner.arrays(name if name == INCARNATIONS_BLOCK else self.prefix + name, layout)

    def wait(self, receivers: Sequence[Receiver], timeout_s: float) -> None:
        self.inner.wait(receivers, timeout_s)

    def note_opened(self, name: str, how: str) -> None:
        self.inner.note_opened(self.rename(name), how)

    def take_dropped(self) -> dict[str, int]:
        return self.inner.take_dropped()

    def close(self) -> None:
        """The process's transport is closed by its owner (srl.launch.shell), not by a lane's view."""


class RenamedTransport(PrefixedTransport):
    """The process's transport with the streams of `renames` (name -> the name opened) renamed."""

    def __init__(self, inner: Transport, renames: dict[str, str]) -> None:
        super().__init__(inner, "")
        self.renames = renames

    def rename(self, name: str) -> str:
        return self.renames.get(name, name)
