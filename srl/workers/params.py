"""Parameter service kernel: keeps the newest versioned weights and serves every subscriber.

Policy workers (and inline-inference actors) never talk to the trainer: the service decouples
them, answers late joiners and restarted workers with the current version, and is the one
place that a remote subscriber (another node) needs to reach.
"""

from __future__ import annotations

from collections.abc import Sequence

from srl.monitor.timing import TimeBreakdown
from srl.streams.params import PUBLISH, SERVICE_IN, SERVICE_OUT, WANT, ordering, service_schema
from srl.streams.schema import checked
from srl.streams.transport import Message, Receiver, Transport
from srl.workers.kernel import KernelDefaults


class ParamServiceKernel(KernelDefaults):
    def __init__(self, transport: Transport, tensor_bytes: Sequence[int]) -> None:
        """`tensor_bytes`: the size of each of the policy's tensors (srl.streams.params.tensor_bytes):
        a publish of anything else is dropped, so it is never stored or served."""
        publishes = transport.receiver(SERVICE_IN)
        self._in = checked(transport, publishes, SERVICE_IN, service_schema(tensor_bytes))
        self._out = transport.publisher(SERVICE_OUT)
        self.latest: Message | None = None
        self.published = 0
        self.clock = TimeBreakdown()  # labels nothing itself: the loop charges waiting and other

    @property
    def receivers(self) -> list[Receiver]:
        return [self._in]

    @property
    def version(self) -> int:
        return self.latest.header[1] if self.latest else -1

    def poll(self) -> bool:
        messages = self._in.recv_all()
        newest = self.latest
        # a publish of the version held is sent on again: its trainer republishes only when it
        # hears no usable segment, i.e. a subscriber missed it (srl.streams.params)
        for message in messages:
            if message.header[0] == PUBLISH and (newest is None or _order(message) >= _order(newest)):
                newest = message
        # a WANT(version) is answered once the service holds that version (lock step asks for the
        # next one while the trainer makes it: no answer until it comes)
        wants = [m.header[1] for m in messages if m.header[0] == WANT]
        wanted = newest is not None and bool(wants) and newest.header[1] >= min(wants)
        if newest is not None and (newest is not self.latest or wanted):
            self.latest = newest
            self._out.send((newest.header[1], _order(newest)[0]), newest.frames)
            self.published += 1
        return bool(messages)

    def report(self) -> dict:
        return {"params_version": self.version, "publishes": self.published}


def _order(publish: Message) -> tuple[int, int]:
    """(generation, version) of a PUBLISH (kind, version, generation) message."""
    return ordering(publish.header[1:])
