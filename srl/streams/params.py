"""Parameter stream: the trainer publishes versioned weights through the parameter service.

    trainer --PUBLISH(version, raw tensors)--> parameter service --(version, tensors)--> subscribers
    subscriber --WANT(version)--> parameter service   (a late joiner; one waiting for a version)

Tensors travel as raw buffers in the policy's `state_dict()` order; both ends build the same
policy, so names, shapes and dtypes are known and checked, never sent or unpickled: the service
and every subscriber take only messages whose frames are the policy's tensors, byte for byte
(srl.streams.schema); others are dropped and counted, never stored, served or loaded.

A restarted trainer resumes from its checkpoint with an older version number than the one it
died at; it publishes under a new *generation* (its epoch, see srl.streams.incarnations), and
(generation, version) pairs order the weights, so its first publish replaces the dead trainer's.

Both hops keep the newest message only (ZeroMQ's CONFLATE, srl.streams.queues), and a conflating
pipe can hold a message back: its double buffer swaps in a write only if the reader is not
reading at that instant, else the write waits for the next one; and a restarted service's first
sends reach no subscriber that has not reconnected yet. Outside lock step the next version is
usually that write, but not when the trainer drops every segment (acted more than max_policy_lag
versions ago by weights a subscriber kept: it makes no next version). A lock-step run makes no
next version until its actors have this one either. So both ends ask again: a subscriber waiting
for a version sends WANT(version) every WANT_RETRY_S, which the service answers once it holds that
version, and a trainer that heard no segment it could use since it published sends the same
version again every REPUBLISH_S, which the service sends on to its subscribers again.

A WANT cannot be answered to its asker alone: params.out is a publisher, which has no address per
subscriber (a reply socket per subscriber is the one-socket-per-peer growth that issue 34 removes
elsewhere), so an answer goes to every subscriber. The service answers the first WANT at once and
folds the WANTs of the next ANSWER_INTERVAL_S into one answer (`WantAnswers`): 1,024 late joiners
asking at once cost one or two copies to each, not one answer per asker to all (measured before:
2,732 copies of a version for 1,024 subscribers at 1 Gbit, benchmarks/param_fanout.py).

Across hosts a relay per host (srl.workers.params.ParamRelayKernel, placed by the launcher:
dataflow.param_relay) subscribes once to the service and serves its host's subscribers on streams
of its own, `relay{h}.params.in` / `relay{h}.params.out` (`relay_prefix`): the service sends one
copy per host, not per subscriber.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from srl import devices, transfer
from srl.streams.incarnations import NO_RESTARTS, Incarnations
from srl.streams.schema import COUNT, EPOCH, Kinds, Schema, checked, one_of
from srl.streams.transport import Receiver, Sender, Transport

SERVICE_IN = "params.in"
SERVICE_OUT = "params.out"
SERVICE = "params:0"  # the worker that serves them
PUBLISH, WANT = 1, 2
WANT_RETRY_S = 0.2
REPUBLISH_S = 1.0
# WANTs within this long of an answer are answered together once it has passed: below
# WANT_RETRY_S, so an asker whose WANT was folded in is answered before it asks again
ANSWER_INTERVAL_S = WANT_RETRY_S / 2
RELAY = "relay"  # relay h is the worker relay:h; its streams carry relay_prefix(h)


def relay_prefix(relay: int) -> str:
    """The prefix of relay `relay`'s own streams: its subscribers ask and take there."""
    return f"{RELAY}{relay}."


def relay_streams(relay: int) -> dict[str, str]:
    """A relayed subscriber's parameter streams, by the name the stream code opens them under."""
    return {name: relay_prefix(relay) + name for name in (SERVICE_IN, SERVICE_OUT)}


def tensor_bytes(module: torch.nn.Module) -> list[int]:
    """The size of each frame of `module`'s weights, in `state_frames` order."""
    return [t.numel() * t.element_size() for t in module.state_dict().values()]


def service_schema(tensors: Sequence[int]) -> Kinds:
    """What the service takes: (PUBLISH, version, generation) with the policy's tensors, (WANT,
    version): answer once you hold that version or a later one (0: any)."""
    return Kinds({
        PUBLISH: Schema({"kind": one_of(PUBLISH), "version": COUNT, "generation": EPOCH},
                        frame_bytes=tensors),
        WANT: Schema({"kind": one_of(WANT), "version": COUNT}),
    })  # fmt: skip


def weights_schema(tensors: Sequence[int]) -> Schema:
    """What subscribers take: (version, generation) with the policy's tensors."""
    return Schema({"version": COUNT, "generation": EPOCH}, frame_bytes=tensors)


def state_frames(module: torch.nn.Module, staging: transfer.Staging | None = None) -> list[np.ndarray]:
    """`module`'s tensors as host arrays, in `state_dict()` order. With a staging (the module on a
    GPU) each is copied asynchronously into its reused pinned buffer and the CPU waits once for
    all of them, not once per tensor: the arrays hold until the next call with that staging, and
    every Sender copies what it sends (srl.streams.transport), so sending them at once is safe."""
    tensors = module.state_dict().values()
    if staging is None:
        return [t.detach().cpu().contiguous().numpy() for t in tensors]  # views of the CPU's tensors
    frames = [staging.to_host(str(i), t.detach()) for i, t in enumerate(tensors)]
    staging.wait()
    return frames


def load_frames(module: torch.nn.Module, frames: Sequence[bytes | memoryview]) -> None:
    """Copy raw frames into `module`'s state, checking each size against the local tensor."""
    state = module.state_dict()
    if len(frames) != len(state):
        raise ValueError(f"parameter message has {len(frames)} tensors, the policy has {len(state)}")
    with torch.no_grad():
        for (name, tensor), frame in zip(state.items(), frames):
            data = np.frombuffer(frame, dtype=np.dtype(str(tensor.dtype).removeprefix("torch.")))
            if data.size != tensor.numel():
                raise ValueError(f"parameter {name!r}: got {data.size} values, expected {tensor.numel()}")
            tensor.copy_(torch.from_numpy(data.reshape(tensor.shape).copy()))  # frames are read-only


class ParamPublisher:
    def __init__(
        self, transport: Transport, generation: int = 0, incarnations: Incarnations = NO_RESTARTS
    ) -> None:
        self._out = transport.sender(SERVICE_IN)
        self.generation = generation
        self._incarnations = incarnations
        self._service_epoch = incarnations.of(SERVICE)
        self._quiet_since_s = time.monotonic()  # the last publish, or data heard after it
        # a module on a GPU: one wait per version, not one per tensor (made at the first publish)
        self._staging: transfer.Staging | None = None
        self._staging_known = False

    def publish(self, version: int, module: torch.nn.Module) -> None:
        if not self._staging_known:
            self._staging, self._staging_known = transfer.for_device(devices.of(module)), True
        self._out.send((PUBLISH, version, self.generation), state_frames(module, self._staging))
        self._quiet_since_s = time.monotonic()

    def publish_again_if_unheard(self, version: int, module: torch.nn.Module, heard: bool) -> None:
        """Send `version` again when the trainer has heard nothing (no data) for REPUBLISH_S since
        it published it: the publish may be held back in a conflating pipe (see the module doc)."""
        if heard:
            self._quiet_since_s = time.monotonic()
        elif time.monotonic() - self._quiet_since_s >= REPUBLISH_S:
            self.publish(version, module)

    def service_restarted(self) -> bool:
        """True once after each restart of the parameter service (which lost the weights)."""
        epoch = self._incarnations.of(SERVICE)
        restarted, self._service_epoch = epoch != self._service_epoch, epoch
        return restarted


def ordering(header: tuple[int, ...]) -> tuple[int, int]:
    """(generation, version) of a (version, generation) header."""
    return (header[1], header[0])


class FixedParams:
    """In place of a ParamSubscriber for a policy that does not train (config policies.<name>.trainable
    false): its weights are the ones it was made with, version 0, nothing to receive."""

    def __init__(self) -> None:
        self.version, self.generation = 0, 0
        self.receivers: list[Receiver] = []

    def poll(self, module: torch.nn.Module, waiting_for: int = 0) -> bool:
        return False


class ParamSubscriber:
    """Holds the newest version seen; `poll` loads it into the policy when it is newer. Takes only
    weights shaped as `module`'s (the policy it will load them into)."""

    def __init__(self, transport: Transport, module: torch.nn.Module) -> None:
        schema = weights_schema(tensor_bytes(module))
        self._in = checked(transport, transport.subscriber(SERVICE_OUT), SERVICE_OUT, schema)
        self._asking = Asking(transport.sender(SERVICE_IN), patience_s=WANT_RETRY_S)
        self.version = -1
        self.generation = 0
        self.receivers: list[Receiver] = [self._in]

    def poll(self, module: torch.nn.Module, waiting_for: int = 0) -> bool:
        """Load the newest waiting version into `module`; True if it changed. `waiting_for`: the
        version the caller waits for (lock step), asked for again when it is slow to come."""
        messages = self._in.recv_all()
        newest = max(messages, key=lambda m: ordering(m.header), default=None)
        if newest is not None and ordering(newest.header) > (self.generation, self.version):
            load_frames(module, newest.frames)
            self.generation, self.version = ordering(newest.header)
            self._asking.done()
            return True
        self._asking.ask(self.version, waiting_for)
        return False


class Asking:
    """When a subscriber (or a relay, for its subscribers) asks the service for a version (WANT):
    at once while it holds none (a late joiner, a restarted worker or relay), every WANT_RETRY_S
    after; for a later version, from `patience_s` after it began waiting (most versions arrive in
    milliseconds: a subscriber waits WANT_RETRY_S; a relay asks upstream at once, its subscriber
    waited already), then every WANT_RETRY_S."""

    def __init__(self, sender: Sender, patience_s: float) -> None:
        self._sender, self.patience_s = sender, patience_s
        self._due_s: float | None = None  # when to ask next; None: not waiting
        self.asked = 0

    def done(self) -> None:
        self._due_s = None

    def ask(self, held: int, waiting_for: int) -> None:
        if held >= 0 and waiting_for <= held:
            self._due_s = None
            return
        now = time.monotonic()
        if self._due_s is None:
            self._due_s = now if held < 0 else now + self.patience_s
        if now >= self._due_s:
            self._sender.send((WANT, max(waiting_for, 0)))
            self._due_s = now + WANT_RETRY_S
            self.asked += 1


class WantAnswers:
    """Which WANTs the service answers now (by publishing the version it holds to all: see the
    module doc): the first at once, those within ANSWER_INTERVAL_S of an answer together at its
    end; a WANT waits while the service holds no version as new as it asks for."""

    def __init__(self) -> None:
        self._wanted: int | None = None  # the lowest version asked for and not answered yet
        self._answered_s = -float("inf")

    def add(self, versions: Sequence[int]) -> None:
        if versions:
            self._wanted = min(versions) if self._wanted is None else min(self._wanted, *versions)

    def sent(self, version: int) -> None:
        """A version went to every subscriber: the WANTs it answers are done."""
        if self._wanted is not None and version >= self._wanted:
            self._wanted = None

    def due(self, held: int) -> bool:
        """Whether to answer now, holding version `held` (-1: none); True marks them answered."""
        now = time.monotonic()
        if self._wanted is None or held < self._wanted or now - self._answered_s < ANSWER_INTERVAL_S:
            return False
        self._wanted, self._answered_s = None, now
        return True
