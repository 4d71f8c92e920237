"""Parameter stream: the trainer publishes versioned weights through the parameter service.

    trainer --PUBLISH(version, raw tensors)--> parameter service --(version, tensors)--> subscribers
    subscriber --WANT--> parameter service   (on start, until it has a version: late joiners)

Tensors travel as raw buffers in the policy's `state_dict()` order; both ends build the same
policy, so names, shapes and dtypes are known and checked, never sent or unpickled: the service
and every subscriber take only messages whose frames are the policy's tensors, byte for byte
(srl.streams.schema); others are dropped and counted, never stored, served or loaded.

A restarted trainer resumes from its checkpoint with an older version number than the one it
died at; it publishes under a new *generation* (its epoch, see srl.streams.incarnations), and
(generation, version) pairs order the weights, so its first publish replaces the dead trainer's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from srl.streams.incarnations import NO_RESTARTS, Incarnations
from srl.streams.schema import COUNT, EPOCH, Kinds, Schema, checked, one_of
from srl.streams.transport import Receiver, Transport

SERVICE_IN = "params.in"
SERVICE_OUT = "params.out"
SERVICE = "params:0"  # the worker that serves them
PUBLISH, WANT = 1, 2
WANT_RETRY_S = 0.2


def tensor_bytes(module: torch.nn.Module) -> list[int]:
    """The size of each frame of `module`'s weights, in `state_frames` order."""
    return [t.numel() * t.element_size() for t in module.state_dict().values()]


def service_schema(tensors: Sequence[int]) -> Kinds:
    """What the service takes: (PUBLISH, version, generation) with the policy's tensors, (WANT, 0)."""
    return Kinds({
        PUBLISH: Schema({"kind": one_of(PUBLISH), "version": COUNT, "generation": EPOCH},
                        frame_bytes=tensors),
        WANT: Schema({"kind": one_of(WANT), "zero": one_of(0)}),
    })  # fmt: skip


def weights_schema(tensors: Sequence[int]) -> Schema:
    """What subscribers take: (version, generation) with the policy's tensors."""
    return Schema({"version": COUNT, "generation": EPOCH}, frame_bytes=tensors)


def state_frames(module: torch.nn.Module) -> list[np.ndarray]:
    return [t.detach().cpu().contiguous().numpy() for t in module.state_dict().values()]


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

    def publish(self, version: int, module: torch.nn.Module) -> None:
        self._out.send((PUBLISH, version, self.generation), state_frames(module))

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

    def poll(self, module: torch.nn.Module) -> bool:
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
        self._last_want_s = 0.0
        self.receivers: list[Receiver] = [self._in]

    def poll(self, module: torch.nn.Module) -> bool:
        """Load the newest waiting version into `module`; True if it changed."""
        messages = self._in.recv_all()
        newest = max(messages, key=lambda m: ordering(m.header), default=None)
        if newest is not None and ordering(newest.header) > (self.generation, self.version):
            load_frames(module, newest.frames)
            self.generation, self.version = ordering(newest.header)
            return True
        if self.version < 0 and time.monotonic() - self._last_want_s > WANT_RETRY_S:
            self._want.send((WANT, 0))
            self._last_want_s = time.monotonic()
        return False
