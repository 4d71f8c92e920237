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
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from srl import devices, transfer
from srl.streams.incarnations import NO_RESTARTS, Incarnations
from srl.streams.schema import COUNT, EPOCH, Kinds, Schema, checked, one_of
from srl.streams.transport import Receiver, Transport

SERVICE_IN = "params.in"
SERVICE_OUT = "params.out"
SERVICE = "params:0"  # the worker that serves them
PUBLISH, WANT = 1, 2
WANT_RETRY_S = 0.2
REPUBLISH_S = 1.0


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
        self._want = transport.sender(SERVICE_IN)
        self.version = -1
        self.generation = 0
        self._want_due_s: float | None = None  # when to ask (WANT) next; None: not waiting
        self.receivers: list[Receiver] = [self._in]

    def poll(self, module: torch.nn.Module, waiting_for: int = 0) -> bool:
        """Load the newest waiting version into `module`; True if it changed. `waiting_for`: the
        version the caller waits for (lock step), asked for again when it is slow to come."""
        messages = self._in.recv_all()
        newest = max(messages, key=lambda m: ordering(m.header), default=None)
        if newest is not None and ordering(newest.header) > (self.generation, self.version):
            load_frames(module, newest.frames)
            self.generation, self.version = ordering(newest.header)
            self._want_due_s = None
            return True
        self._ask(waiting_for)
        return False

    def _ask(self, waiting_for: int) -> None:
        """WANT at once while it has no version (a late joiner), every WANT_RETRY_S after; for a
        later version, from WANT_RETRY_S after it began waiting (most arrive in milliseconds)."""
        if self.version >= 0 and waiting_for <= self.version:
            self._want_due_s = None
            return
        now = time.monotonic()
        if self._want_due_s is None:
            self._want_due_s = now if self.version < 0 else now + WANT_RETRY_S
        if now >= self._want_due_s:
            self._want.send((WANT, max(waiting_for, 0)))
            self._want_due_s = now + WANT_RETRY_S
