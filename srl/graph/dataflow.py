"""What the dataflow is made of: workers and streams as they run (srl.graph declares them for a
config), the control streams every run has, and the workers of the user's own kinds
(srl.api.worker) with their streams."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from srl.api import registry
from srl.config import ConfigError, ExperimentConfig
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, MAX_ATTACHED, MAX_REPORT_BYTES, Role
from srl.streams.samples import tap_name

SAMPLES = "samples"  # the extra workers' built-in input: a copy of every segment taken (srl.streams.samples.SampleTap)
USER_PREFIX = "user."  # the transport name of an extra worker's output: user.<output>
CONTROLLER = "controller"  # not a worker: the launcher's own process, which binds the control streams


class Delivery(str, Enum):
    """What a stream guarantees, as its code does it (srl.streams.*, srl.streams.queues)."""

    SLOTS = "lossless, in order (slots)"  # handed over and back: the producer waits while all are out
    NEWEST = "latest value only"  # older versions may be skipped, never follow a newer one
    BOUNDED = "bounded, drops counted"  # a send waits at most 1 s at the queue's bound, then is dropped
    BROADCAST = "broadcast, late or slow subscribers miss some"  # counted as dropped over tcp
    COLLECTIVE = "all-reduce each update"  # every trainer, every update


@dataclass(frozen=True)
class StreamSpec:
    """A stream as it runs. `owner` binds `name` (its receiver or publisher); every other worker
    named connects. `frames`: the byte sizes of its largest message's frames (tcp refuses larger
    ones and sizes its queues by them); `in_flight`: the messages one producer may have out at once
    on a slot stream (0: not slot-bound). `via`: the Transport, or torch.distributed."""

    name: str
    kind: str  # requests, replies, samples, released, batches, params, control, gradients, tap, user
    owner: str
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    delivery: Delivery
    payload: str
    frames: tuple[int, ...] = ()
    in_flight: int = 0
    via: str = "transport"

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.owner, *self.producers, *self.consumers)))


@dataclass(frozen=True)
class WorkerSpec:
    role: Role
    index: int
    kind: str = ""  # Role.CUSTOM: the registered worker kind (srl.api.worker)

    @property
    def name(self) -> str:
        return f"{self.role.title}:{self.index}"


def control_streams(workers: tuple[str, ...], attachment_bytes: int = 0) -> list[StreamSpec]:
    """Reports up to the controller, stop (and, over tcp, epochs) down to every worker.
    `attachment_bytes`: the largest bytes value a report or command attaches (an ensemble
    member's weights, srl.streams.control.detach); 0: none."""
    report = (MAX_REPORT_BYTES, *[attachment_bytes] * (MAX_ATTACHED if attachment_bytes else 0))
    return [StreamSpec(CONTROLLER_IN, "control", CONTROLLER, workers, (CONTROLLER,), Delivery.BOUNDED,
                       "reports, heartbeats", report),
            StreamSpec(CONTROL_OUT, "control", CONTROLLER, (CONTROLLER,), workers, Delivery.BROADCAST,
                       "stop, epochs, commands", report)]


def extra_workers(config: ExperimentConfig) -> list[WorkerSpec]:
    """custom:0, custom:1, ... in the order `extra_workers` lists them (kinds checked in srl.config)."""
    kinds = [w.kind for w in config.extra_workers for _ in range(w.count)]
    return [WorkerSpec(Role.CUSTOM, i, kind) for i, kind in enumerate(kinds)]


def custom_streams(workers: list[WorkerSpec], streams: list[StreamSpec]) -> list[StreamSpec]:
    """A tap of each samples stream for the workers that take "samples" (its consumer publishes a
    copy of each segment), and each placed kind's outputs, read by the one worker that takes it."""
    placed = [(w, registry.workers.get(w.kind)) for w in workers if w.role == Role.CUSTOM]
    tappers = tuple(w.name for w, kind in placed if SAMPLES in kind.inputs)
    out = [StreamSpec(tap_name(s.name), "tap", s.owner, (s.owner,), tappers, Delivery.BROADCAST,
                      f"copies of {s.name}'s segments", s.frames) for s in streams if s.kind == "samples" and tappers]
    outputs = dict.fromkeys(name for _, kind in placed for name in kind.outputs)
    for name in outputs:
        givers = [(w.name, kind.max_message_bytes) for w, kind in placed if name in kind.outputs]
        readers = tuple(w.name for w, kind in placed if name in kind.inputs)
        if len(readers) != 1:
            raise ConfigError(f"field 'extra_workers': output {name!r} needs exactly one placed worker that takes "
                              f"it (it binds the stream), got {len(readers)}: {list(readers)}")
        out.append(StreamSpec(USER_PREFIX + name, "user", readers[0], tuple(n for n, _ in givers), readers,
                              Delivery.BOUNDED, f"{name} messages", (max(b for _, b in givers),)))
    for w, kind in placed:
        missing = [name for name in kind.inputs if name != SAMPLES and name not in outputs]
        if missing:
            raise ConfigError(f"field 'extra_workers': worker kind {w.kind!r} takes {missing}, which no placed "
                              f"worker gives; an input is {SAMPLES!r} or another placed kind's output")
    return out
