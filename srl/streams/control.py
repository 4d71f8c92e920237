"""Control stream: workers report to the controller; the controller tells them to stop.

worker -> controller: (kind, role, index) + one JSON frame, what srl.streams.reports declares. JSON, not pickle: it cannot run code.
controller -> workers: (STOP,) broadcast; (COMMAND, role, index) + one JSON frame, broadcast and
taken by that one worker (an ensemble member's adopt: srl.population.ensemble).

A report's or a command's bytes values (an ensemble member's evaluated weights, the weights it is
to adopt) travel as frames after the JSON one, at most MAX_ATTACHED, each replaced in the JSON by
{ATTACHED: its number} (`detach`) and put back on arrival (`attach`): the weights go with the
message that names them, over whatever carries the run's streams, so no worker needs the
controller's disk (a run on Ray over tcp with no shared run directory). Their largest size is
the graph's to declare (srl.graph.dataflow.control_streams); a run that declares none sends none.

Each end takes only messages of these shapes (srl.streams.schema): a worker, a STOP or one frame
of (worker, epoch) pairs of this run; the controller, reports of its own workers whose payloads hold what it
reads (srl.launch.reports). The rest is dropped and counted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any

import numpy as np

from srl.streams.schema import EPOCH, INDEX, Kinds, Malformed, Schema, checked, json_object, one_of
from srl.streams.transport import Message, Receiver, Transport

CONTROLLER_IN = "controller.in"
CONTROL_OUT = "control.out"
STOP = 1
# (EPOCHS,) + one frame of int64 [position, epoch] pairs, positions in the run's worker list: over
# tcp, where epochs are not shared memory, what changed (srl.streams.incarnations)
EPOCHS = 2
COMMAND = 3  # (COMMAND, role, index) + one JSON object for that worker's kernel (`Kernel.command`)
MAX_REPORT_BYTES = 4 << 20  # one JSON report; generous, reports are a few KiB
ATTACHED = "$attached"  # a bytes value's stand-in in the JSON frame: {ATTACHED: frame number}
_MARK = json.dumps(ATTACHED).encode()
MAX_ATTACHED = 4  # attachments one report or command may carry


class Kind(IntEnum):
    REPORT = 1  # periodic stats; doubles as the heartbeat
    ERROR = 2  # the worker failed; payload {Key.TRACEBACK: str} (srl.streams.reports)
    FINAL = 3  # last report before a clean exit


class Role(IntEnum):
    ACTOR = 0
    POLICY = 1
    TRAINER = 2
    PARAMS = 3
    POD = 4  # env, policy and trainer in one process (srl.workers.pod)
    BUFFER = 5  # replay memory between actors and trainer (srl.workers.buffer)
    EVAL = 6  # deterministic evaluation episodes (srl.workers.evaluator)
    CUSTOM = 7  # a worker kind of the user's, placed by `extra_workers` (srl.api.worker)
    RELAY = 8  # one host's parameter service, fed by the run's (srl.workers.params.ParamRelayKernel)

    @property
    def trains(self) -> bool:
        """Its process runs gradient steps (and may be given more torch threads)."""
        return self in (Role.TRAINER, Role.POD)

    @property
    def title(self) -> str:
        return self.name.lower()


def command_schema(epochs: np.ndarray | None) -> Kinds:
    """(STOP,), or (EPOCHS,) with one frame of (position, epoch) pairs of this run's workers (any
    frame where this worker keeps no epochs: it reads none), or a COMMAND with one JSON object."""
    epochs_frame = Schema({"kind": one_of(EPOCHS)}, frame_bytes=(None,))
    if epochs is not None:
        workers = len(epochs)
        epochs_frame = Schema({"kind": one_of(EPOCHS)}, frame_bytes=(None,),
                              content=lambda message: _check_epoch_pairs(message, workers))
    command = Schema({"kind": one_of(COMMAND), "role": one_of(*Role), "index": INDEX}, frame_bytes=(None,),
                     content=_check_command, more_frames=MAX_ATTACHED)
    return Kinds({STOP: Schema({"kind": one_of(STOP)}), EPOCHS: epochs_frame, COMMAND: command})


def _check_command(message: Message) -> None:
    payload = json_object(message.frames[0], "a command")
    try:
        attach(payload, message.frames[1:], bytes(message.frames[0]))
    except ValueError as error:
        raise Malformed(f"a command's attachments: {error}") from None


def _check_epoch_pairs(message: Message, workers: int) -> None:
    size = len(message.frames[0])
    if size == 0 or size % 16 or size > 16 * workers:
        raise Malformed(f"an epochs frame of {size} bytes, not 1 to {workers} pairs of int64")
    pairs = epoch_pairs(message.frames[0])
    if pairs[:, 0].min() < 0 or pairs[:, 0].max() >= workers:
        raise Malformed(f"epochs of workers outside [0, {workers}): {pairs[:, 0].tolist()[:8]}")
    if pairs[:, 1].min() < EPOCH.start or pairs[:, 1].max() >= EPOCH.stop:
        raise Malformed(f"epochs outside [{EPOCH.start}, {EPOCH.stop}): {pairs[:, 1].tolist()[:8]}")


def epoch_pairs(frame: bytes | memoryview) -> np.ndarray:
    """An EPOCHS frame as [[position, epoch], ...]."""
    return np.frombuffer(frame, np.int64).reshape(-1, 2)


def report_schema(content: Callable[[Message], None]) -> Schema:
    """(kind, role, index) + one frame; `content` checks it (the controller's: srl.launch.reports)."""
    fields = {"kind": one_of(*Kind), "role": one_of(*Role), "index": INDEX}
    return Schema(fields, frame_bytes=(None,), content=content, more_frames=MAX_ATTACHED)


def detach(payload: Any, frames: list[bytes] | None = None) -> tuple[Any, list[bytes]]:
    """`payload` with each bytes value replaced by {ATTACHED: n}, and those values in order (n)."""
    frames = [] if frames is None else frames
    if isinstance(payload, bytes | bytearray | memoryview):
        frames.append(bytes(payload))
        return {ATTACHED: len(frames) - 1}, frames
    if isinstance(payload, dict):
        return {k: detach(v, frames)[0] for k, v in payload.items()}, frames
    if isinstance(payload, list | tuple):
        return [detach(v, frames)[0] for v in payload], frames
    return payload, frames


def attach(payload: Any, frames: Sequence[bytes | memoryview], text: bytes | None = None) -> Any:
    """`detach` undone: each {ATTACHED: n} is frame n again. ValueError unless the payload names
    each frame once (a frame it does not name, or a number it has no frame for, is malformed).
    `text`: the JSON the payload was parsed from: without frames, and without ATTACHED in it, there
    is nothing to put back, and the payload is not walked (the controller parses every report)."""
    if not frames and text is not None and _MARK not in text:
        return payload
    named: list[int] = []
    out = _attach(payload, frames, named)
    if sorted(named) != list(range(len(frames))):
        raise ValueError(f"attachments {sorted(named)} named for {len(frames)} frame(s)")
    return out


def _attach(payload: Any, frames: Sequence[bytes | memoryview], named: list[int]) -> Any:
    if isinstance(payload, dict):
        if set(payload) == {ATTACHED}:
            n = payload[ATTACHED]
            if type(n) is not int or not 0 <= n < len(frames):
                raise ValueError(f"attachment {n!r} of {len(frames)}")
            named.append(n)
            return bytes(frames[n])
        return {k: _attach(v, frames, named) for k, v in payload.items()}
    if isinstance(payload, list):
        return [_attach(v, frames, named) for v in payload]
    return payload


def _send(sender: Any, header: tuple[int, ...], payload: dict[str, Any]) -> None:
    body, frames = detach(payload)
    if len(frames) > MAX_ATTACHED:
        raise ValueError(f"{len(frames)} attachments in one message; at most {MAX_ATTACHED}")
    sender.send(header, [json.dumps(body).encode(), *frames])


class WorkerLink:
    """A worker's end of the control stream."""

    def __init__(self, transport: Transport, role: Role, index: int, epochs: np.ndarray | None = None) -> None:
        self.role, self.index = role, index
        self._epochs = epochs  # this process's copy of the epochs, raised by the EPOCHS broadcasts
        self._out = transport.sender(CONTROLLER_IN)
        commands = transport.subscriber(CONTROL_OUT)
        self._stop = checked(transport, commands, CONTROL_OUT, command_schema(epochs))
        self.receivers: list[Receiver] = [self._stop]
        self.stopping = False
        self.commands: list[dict[str, Any]] = []  # this worker's, until taken (`take_commands`)

    def send(self, kind: Kind, payload: dict[str, Any]) -> None:
        _send(self._out, (kind, self.role, self.index), payload)

    def poll_stop(self) -> bool:
        for message in self._stop.recv_all():
            if message.header[0] == STOP:
                self.stopping = True
            elif message.header[0] == EPOCHS and self._epochs is not None:  # positions within ours (schema)
                pairs = epoch_pairs(message.frames[0])
                np.maximum.at(self._epochs, pairs[:, 0], pairs[:, 1])  # epochs only grow
            elif message.header[0] == COMMAND and tuple(message.header[1:]) == (self.role, self.index):
                # a JSON object, its attachments checked (schema)
                text = bytes(message.frames[0])
                self.commands.append(attach(json.loads(text), message.frames[1:], text))
        return self.stopping

    def take_commands(self) -> list[dict[str, Any]]:
        commands, self.commands = self.commands, []
        return commands


def send_command(publisher: Any, role: Role, index: int, command: dict[str, Any]) -> None:
    """The controller's command to one worker, on the control.out broadcast."""
    _send(publisher, (COMMAND, role, index), command)


def decode_report(message: Message) -> tuple[Kind, Role, int, dict[str, Any]]:
    kind, role, index = message.header[:3]
    text = bytes(message.frames[0]) if message.frames else b"{}"
    payload = json.loads(text)
    if not isinstance(payload, dict):
        raise ValueError("report payload is not a JSON object")
    payload = attach(payload, message.frames[1:], text)
    return Kind(kind), Role(role), index, payload
