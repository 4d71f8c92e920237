"""Parameter service kernel: keeps the newest versioned weights and serves every subscriber; and
the relay kernel, which does the same for one host's subscribers, subscribed once to the service.

Policy workers (and inline-inference actors) never talk to the trainer: the service decouples
them, answers late joiners and restarted workers with the current version, and is the one
place that a remote subscriber (another node) needs to reach.

    trainer --params.in--> service --params.out--> relay h --relay{h}.params.out--> host h's subscribers
                                   <--WANT(v)----          <--WANT(v) relay{h}.params.in--

Without relays the service sends every version to every subscriber: its egress is subscribers x
model bytes x versions/s (1,024 x 64 KiB at 1 Gbit: 4.0 s a version, docs/scaling.md). With one
relay per subscriber host (dataflow.param_relay, placed by the launcher) it sends one copy per host.
"""

from __future__ import annotations

from collections.abc import Sequence

from srl.monitor.timing import TimeBreakdown
from srl.streams.params import (
    PUBLISH,
    SERVICE_IN,
    SERVICE_OUT,
    WANT,
    Asking,
    WantAnswers,
    ordering,
    service_schema,
    weights_schema,
)
from srl.streams.reports import Key, ParamsReport, RelayReport
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
        self.answers = WantAnswers()
        self.clock = TimeBreakdown()  # labels nothing itself: the loop charges waiting and other

    @property
    def receivers(self) -> list[Receiver]:
        return [self._in]

    @property
    def version(self) -> int:
        return self.latest.header[1] if self.latest else -1

    @property
    def generation(self) -> int:
        return _order(self.latest)[0] if self.latest else -1

    def poll(self) -> bool:
        messages = self._in.recv_all()
        self.take(messages)
        return bool(messages)

    def take(self, messages: Sequence[Message]) -> None:
        """PUBLISHes and WANTs, from the trainer and subscribers (or, in a relay, from upstream)."""
        newest = self.latest
        # a publish of the version held is sent on again: its trainer republishes only when it
        # hears no usable segment, i.e. a subscriber missed it (srl.streams.params)
        for message in messages:
            if message.header[0] == PUBLISH and (newest is None or _order(message) >= _order(newest)):
                newest = message
        # a WANT(version) is answered once the service holds that version (lock step asks for the
        # next one while the trainer makes it: no answer until it comes), WANTs close together at once
        self.answers.add([m.header[1] for m in messages if m.header[0] == WANT])
        if newest is not None and newest is not self.latest:
            self.latest = newest
            self._send(newest)
        elif self.latest is not None and self.answers.due(self.version):
            self._send(self.latest)

    def _send(self, publish: Message) -> None:
        self._out.send((publish.header[1], _order(publish)[0]), publish.frames)
        self.answers.sent(publish.header[1])
        self.published += 1

    def report(self) -> ParamsReport:
        return {Key.PARAMS_VERSION: self.version, Key.PUBLISHES: self.published}


class ParamRelayKernel(KernelDefaults):
    """One host's parameter service, fed by the run's: subscribes once upstream (the service's
    params.out, over the run's transport), serves its host's subscribers on `local`'s streams
    (the run's transport under the relay's prefix, srl.streams.params.relay_prefix) as the service
    serves its own: newest version, WANTs answered from what it holds. A local WANT for a version
    newer than the relay holds is asked upstream (a lock-step run waits for it), at once and every
    WANT_RETRY_S while it waits; a relay that holds nothing (it started, or was restarted) asks as a
    late joiner does. Nothing is decoded or loaded: the frames go on as they came, checked once
    against the policy's tensors on the way in."""

    def __init__(self, upstream: Transport, local: Transport, tensor_bytes: Sequence[int]) -> None:
        schema = weights_schema(tensor_bytes)
        self._up = checked(upstream, upstream.subscriber(SERVICE_OUT), SERVICE_OUT, schema)
        self._asking = Asking(upstream.sender(SERVICE_IN), patience_s=0.0)
        self.service = ParamServiceKernel(local, tensor_bytes)
        self._waiting_for = -1  # the newest version a local subscriber asked for, not held yet
        self._generation = -1
        self.clock = self.service.clock

    @property
    def receivers(self) -> list[Receiver]:
        return [self._up, *self.service.receivers]

    @property
    def version(self) -> int:
        return self.service.version

    def poll(self) -> bool:
        came = self._up.recv_all()
        local = self.service.receivers[0].recv_all()
        # a version from upstream is a publish to this host's service, in (generation, version) order
        publishes = [Message((PUBLISH, *m.header), m.frames) for m in came]
        wants = [m for m in local if m.header[0] == WANT]  # no trainer publishes to a relay
        self._waiting_for = max([self._waiting_for, *(m.header[1] for m in wants)])
        self.service.take([*publishes, *wants])
        generation = self.service.generation
        if self.version >= self._waiting_for or generation != self._generation:
            # held, or a restarted trainer numbers its versions anew: its subscribers ask again
            self._waiting_for, self._generation = -1, generation
        self._asking.ask(self.version, self._waiting_for)
        return bool(came or local)

    def report(self) -> RelayReport:
        return {**self.service.report(), Key.WANTS_UPSTREAM: self._asking.asked}


def _order(publish: Message) -> tuple[int, int]:
    """(generation, version) of a PUBLISH (kind, version, generation) message."""
    return ordering(publish.header[1:])
