"""Messages signed with the run's key but malformed are dropped and counted, never raised.

A message that passes the MAC can still be of the wrong shape: a header of the wrong length, an
index of a slot, actor or policy this side does not own, a negative or huge count, the wrong
number or sizes of frames, a report the controller cannot read. Every stream of a tcp run is
fuzzed here with its real sender and receiver endpoints and a sender holding the run's key:
malformed messages interleaved with valid ones, one at a time (lock-step: each is either counted
or delivered before the next is sent, so "exactly once" is checked message by message). Nothing
raises out of the receiving API, each malformed message is counted once in the transport's
rejections, none writes into a slot or changes what the receiver holds, and each valid one
arrives intact. Then a whole `srl run` over tcp receives malformed signed messages on every
stream it listens on, and finishes with no restart, counting them in summary.json.

What is malformed is stated here, stream by stream (`Shape`), apart from the code under test:
the generated messages are kept only where the test's own statement says they do not fit.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Container
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from test_restarts import FakeWorkers
from test_streams import loopback_wire

from srl.api.policy import FieldSpec
from srl.config.checks import build_config
from srl.data import columns as C
from srl.data.replay import batch_fields
from srl.graph import build_graph
from srl.launch.monitor import RunMonitor
from srl.launch.supervise import Supervisor
from srl.streams.batches import BATCHES_NAME, RELEASED_NAME, BatchClient, BatchServer
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, EPOCHS, STOP, Kind, Role, WorkerLink
from srl.streams.incarnations import Incarnations
from srl.streams.inference import InferenceClient, InferenceServer, replies_name, requests_name
from srl.streams.params import (
    PUBLISH,
    SERVICE_IN,
    SERVICE_OUT,
    WANT,
    ParamPublisher,
    ParamSubscriber,
    state_frames,
)
from srl.streams.queues import NEWEST_ONLY
from srl.streams.samples import SampleConsumer, SampleProducer, released_name, samples_name
from srl.streams.tcp import TcpTransport
from srl.workers.params import ParamServiceKernel

DEADLINE_S = 10.0
INT64_MIN, INT64_END = -(2**63), 2**63
COUNTS = range(2**63)  # versions, env steps, request keys: never negative
EPOCHS_ = range(2**31)  # a worker's epoch: one per restart
SPLITS, SLOTS = 2, 2
# No shrinking: the endpoints keep their state from one example to the next, and a failing
# example is reported as found (derandomized: the same examples on every run, CI included).
FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])  # fmt: skip


# ------------------------------------------------------------------------ what fits, stated here


@dataclass(frozen=True)
class Shape:
    """One kind of message a receiver takes: each header field's allowed values, each frame's
    size in bytes (None: any), and what the frames must hold."""

    fields: tuple[Container[int], ...]
    frames: tuple[int | None, ...] = ()
    content: Callable[[list[bytes]], bool] = lambda frames: True

    def fits(self, header: tuple[int, ...], frames: list[bytes]) -> bool:
        return (
            len(header) == len(self.fields)
            and all(v in allowed for v, allowed in zip(header, self.fields))
            and len(frames) == len(self.frames)
            and all(size is None or len(f) == size for f, size in zip(frames, self.frames))
            and self.content(frames)
        )


def nbytes(arrays: dict[str, np.ndarray], names) -> tuple[int, ...]:
    return tuple(arrays[n].nbytes for n in names)


def weight_bytes(module: torch.nn.Module) -> tuple[int, ...]:
    return tuple(t.numel() * t.element_size() for t in module.state_dict().values())


def json_object(frames: list[bytes]) -> bool:
    try:
        return isinstance(json.loads(frames[0]), dict)
    except (ValueError, RecursionError):
        return False


# ------------------------------------------------------------------------ generated messages

edges = st.sampled_from([-1, -(2**31), 2**31 - 1, 2**31, 2**62, INT64_END - 1, INT64_MIN, 99, 10**9])
values = st.one_of(st.integers(-2, 4), edges, st.integers(INT64_MIN, INT64_END - 1))


def frame_strategy(sizes: list[int]) -> st.SearchStrategy[bytes]:
    near = sorted({max(0, s + d) for s in sizes for d in (-1, 0, 1)} | {0, 8})
    exact = st.sampled_from(near).flatmap(lambda n: st.binary(min_size=n, max_size=n))
    return st.one_of(exact, st.binary(max_size=48))


def random_messages(sizes: list[int]) -> st.SearchStrategy:
    headers = st.one_of(st.lists(values, min_size=1, max_size=8), st.lists(values, min_size=1, max_size=64))
    return st.tuples(headers.map(tuple), st.lists(frame_strategy(sizes), max_size=6))


@st.composite
def mutations(draw, template: tuple[tuple[int, ...], list[bytes]], sizes: list[int]):
    """One change to a well-formed message: a field more or less, one field's value, a frame more
    or less, one frame longer or shorter."""
    h, f = list(template[0]), list(template[1])
    op = draw(st.sampled_from(["drop_field", "add_field", "field", "drop_frame", "add_frame", "resize"]))
    if op == "drop_field" and len(h) > 1:
        h.pop(draw(st.integers(0, len(h) - 1)))
    elif op == "add_field":
        h.insert(draw(st.integers(0, len(h))), draw(values))
    elif op == "field":
        h[draw(st.integers(0, len(h) - 1))] = draw(values)
    elif op == "drop_frame" and f:
        f.pop(draw(st.integers(0, len(f) - 1)))
    elif op == "add_frame":
        f.insert(draw(st.integers(0, len(f))), draw(frame_strategy(sizes)))
    elif op == "resize" and f:
        i, delta = draw(st.integers(0, len(f) - 1)), draw(st.sampled_from([-8, -1, 1, 8]))
        f[i] = f[i][:delta] if delta < 0 else f[i] + bytes(delta)
    return tuple(h), f


def events(h: Harness) -> st.SearchStrategy:
    """A sequence of valid messages (a seed for their contents) and malformed ones."""
    sizes = [s for shape in h.shapes for s in shape.frames if s is not None]
    bad = st.one_of(random_messages(sizes), *(mutations(t, sizes) for t in h.templates))
    bad = bad.filter(lambda m: not any(shape.fits(*m) for shape in h.shapes))
    bad = st.one_of(bad, *h.constructed_bad)  # malformed by construction (reports)
    valid = st.integers(0, 2**32 - 1).map(lambda seed: ("valid", seed))
    return st.lists(st.one_of(valid, bad.map(lambda m: ("bad", *m))), min_size=1, max_size=8)


# ------------------------------------------------------------------------ stream harnesses


class Harness:
    """A stream's real endpoints over tcp, a sender with the run's key on the same stream (`bad`),
    and what the receiving side must hold after each message."""

    name: str  # the stream fuzzed
    shapes: list[Shape]
    templates: list[tuple[tuple[int, ...], list[bytes]]]  # well-formed messages, to mutate
    constructed_bad: list[st.SearchStrategy] = []

    def __init__(self, wire, tmp_path) -> None:
        self.wire, self.transports = wire, []
        self.counts: Counter = Counter()
        self.bad_sent = self.valid_sent = 0
        self.pending = None  # what the last valid message must deliver (None: delivered)

    def transport(self) -> TcpTransport:
        self.transports.append(TcpTransport(self.wire))
        return self.transports[-1]

    def rejected(self) -> int:
        """Rejections counted on the receiving side; only ever on the stream fuzzed."""
        for stream, n in self.rx.take_rejected().items():
            self.counts[stream] += n
        assert set(self.counts) <= {self.name}, self.counts
        return self.counts[self.name]

    def wait(self) -> None:
        self.rx.wait(self.receivers, 0.005)

    def close(self) -> None:
        for t in self.transports:
            t.close()


def until(done: Callable[[], bool], step: Callable[[], object], what: str) -> None:
    end = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < end, f"timed out: {what}"
        step()


def play(h: Harness, evs: list) -> None:
    for event in evs:
        if event[0] == "valid":
            h.send_valid(np.random.default_rng(event[1]))
            h.valid_sent += 1
            until(lambda: h.pending is None, lambda: (h.wait(), h.poll()), f"{h.name}: a valid message")
            assert h.rejected() == h.bad_sent, "a valid message was dropped"
        else:
            _, header, frames = event
            h.bad.send(header, frames)
            h.bad_sent += 1
            what = f"{h.name}: malformed {header} with frames of {[len(f) for f in frames]} bytes counted"
            until(lambda: h.rejected() >= h.bad_sent, lambda: (h.wait(), h.poll()), what)
            assert h.rejected() == h.bad_sent, "counted more than once"
        h.check()


def arrays(spec: dict) -> dict[str, np.ndarray]:
    return {name: np.zeros(shape, dtype) for name, (shape, dtype) in spec.items()}


def randomize(target: dict[str, np.ndarray], names, rng) -> None:
    for name in names:
        a = target[name]
        a[...] = rng.integers(0, 2, a.shape) if a.dtype == np.bool_ else rng.integers(-99, 99, a.shape)


def equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray], names) -> bool:
    return all(np.array_equal(a[n], b[n]) for n in names)


SEGMENT = {"obs": ((3, 2), np.float32), "action": ((3,), np.int64), "done": ((3,), np.bool_)}


class Samples(Harness):
    """trainer.samples: actor 0's SampleProducer to the trainer's SampleConsumer."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.actor, self.trainer = self.transport(), self.transport()
        self.mine = {(s, k): arrays(SEGMENT) for s in range(SPLITS) for k in range(SLOTS)}
        self.theirs = {(0, s, k): arrays(SEGMENT) for s in range(SPLITS) for k in range(SLOTS)}
        self.expected = {key: arrays(SEGMENT) for key in self.theirs}
        self.producer = SampleProducer(self.actor, 0, self.mine)
        self.consumer = SampleConsumer(self.trainer, self.theirs)
        self.name, self.rx, self.receivers = samples_name(0), self.trainer, self.consumer.receivers
        self.bad = self.transport().sender(self.name)
        sizes = nbytes(self.mine[(0, 0)], SEGMENT)
        self.shapes = [Shape(({0}, range(SPLITS), range(SLOTS), EPOCHS_, EPOCHS_), sizes)]
        self.templates = [((0, 1, 1, 0, 0), [bytes(n) for n in sizes])]

    def send_valid(self, rng) -> None:
        split = int(rng.integers(SPLITS))
        slot = None

        def take() -> None:
            nonlocal slot
            slot = self.producer.acquire(split)
            if slot is None:
                self.actor.wait(self.producer.receivers, 0.005)

        until(lambda: slot is not None, take, "a free segment slot")
        randomize(self.mine[(split, slot)], SEGMENT, rng)
        for name in SEGMENT:
            self.expected[(0, split, slot)][name][...] = self.mine[(split, slot)][name]
        self.producer.send(split, slot)
        self.pending = (0, split, slot)

    def poll(self) -> None:
        for ref in self.consumer.poll(limit=8):
            assert (ref.actor, ref.split, ref.slot) == self.pending, f"delivered {ref}, sent {self.pending}"
            assert equal(self.consumer.segment(ref), self.expected[self.pending], SEGMENT)
            self.consumer.release(ref)
            self.pending = None

    def check(self) -> None:
        assert all(equal(self.theirs[key], self.expected[key], SEGMENT) for key in self.theirs)
        assert self.consumer.stale == 0


class Releases(Samples):
    """actor.0.released: the trainer's releases back to actor 0's SampleProducer."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.name, self.rx, self.receivers = released_name(0), self.actor, self.producer.receivers
        self.bad = self.transport().sender(self.name)
        self.shapes = [Shape((range(SPLITS), range(SLOTS), EPOCHS_, EPOCHS_))]
        self.templates = [((1, 0, 0, 0), [])]
        self.released: tuple[int, int] | None = None

    def send_valid(self, rng) -> None:
        super().send_valid(rng)
        sent = self.pending[1:]
        until(lambda: self.pending is None, lambda: (self.trainer.wait(self.consumer.receivers, 0.005),
                                                     Samples.poll(self)), "a segment")  # fmt: skip
        self.pending = sent  # the consumer released it: the release must reach the actor

    def poll(self) -> None:
        self.producer.collect_releases()
        if self.pending is not None and self.pending not in self.producer._sent:
            self.pending = None

    def check(self) -> None:
        super().check()
        assert self.pending is not None or not self.producer._sent


SLOT = {"obs": ((3, 4), np.float32), "action": ((3,), np.int64), "value": ((3,), np.float32),
        "version": ((1,), np.int64)}  # fmt: skip
REPLY = ["action", "value", "version"]


class Requests(Harness):
    """policy.0.requests: actor 0's InferenceClient to policy worker 0's InferenceServer."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.actor, self.policy = self.transport(), self.transport()
        self.mine = [arrays(SLOT) for _ in range(SPLITS)]
        self.theirs = {(0, s): arrays(SLOT) for s in range(SPLITS)}
        self.expected = {s: arrays(SLOT) for s in range(SPLITS)}  # obs there, the reply here
        self.client = InferenceClient(self.actor, 0, 0, slots=self.mine)
        self.server = InferenceServer(self.policy, 0, [0], slots=self.theirs)
        self.key = 0
        self.name, self.rx, self.receivers = requests_name(0), self.policy, self.server.receivers
        self.bad = self.transport().sender(self.name)
        sizes = nbytes(self.mine[0], ["obs"])
        self.shapes = [Shape(({0}, range(SPLITS), COUNTS, COUNTS, EPOCHS_), sizes)]
        self.templates = [((0, 1, 0, 3, 0), [bytes(n) for n in sizes])]

    def request(self, rng) -> int:
        split, self.key = int(rng.integers(SPLITS)), self.key + 1
        randomize(self.mine[split], ["obs"], rng)
        self.expected[split]["obs"][...] = self.mine[split]["obs"]
        self.client.request(split, key=self.key)
        return split

    def send_valid(self, rng) -> None:
        self.pending = (0, self.request(rng), self.key)

    def poll(self) -> None:
        for r in self.server.poll(limit=8):
            assert (r.actor, r.split, r.key) == self.pending, f"delivered {r}, sent {self.pending}"
            assert equal(self.theirs[(0, r.split)], self.expected[r.split], ["obs"])
            self.server.reply([r])
            self.pending = None
        self.client.ready()

    def check(self) -> None:
        assert all(equal(self.theirs[(0, s)], self.expected[s], ["obs"]) for s in range(SPLITS))


class Replies(Requests):
    """actor.0.replies: policy worker 0's replies, with the slot's actions and outputs."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.name, self.rx, self.receivers = replies_name(0), self.actor, self.client.receivers
        self.bad = self.transport().sender(self.name)
        sizes = nbytes(self.mine[0], REPLY)
        self.shapes = [Shape((range(SPLITS), COUNTS, EPOCHS_), sizes)]
        self.templates = [((1, 5, 0), [bytes(n) for n in sizes])]

    def send_valid(self, rng) -> None:
        split = self.request(rng)
        got: list = []
        until(lambda: bool(got), lambda: (self.policy.wait(self.server.receivers, 0.005),
                                          got.extend(self.server.poll(limit=8))), "a request")  # fmt: skip
        randomize(self.theirs[(0, split)], REPLY, rng)
        for name in REPLY:
            self.expected[split][name][...] = self.theirs[(0, split)][name]
        self.server.reply(got)
        self.pending = split

    def poll(self) -> None:
        for split in self.client.ready():
            assert split == self.pending, f"delivered {split}, sent {self.pending}"
            self.pending = None

    def check(self) -> None:
        assert all(equal(self.mine[s], self.expected[s], REPLY) for s in range(SPLITS))


def linear(rng=None) -> torch.nn.Linear:
    module = torch.nn.Linear(3, 2)
    with torch.no_grad():
        for t in module.parameters():
            t.copy_(torch.zeros_like(t) if rng is None else torch.from_numpy(rng.normal(size=t.shape)))
    return module


class ParamsIn(Harness):
    """params.in: the trainer's ParamPublisher to the parameter service."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.trainer, self.params = self.transport(), self.transport()
        self.service = ParamServiceKernel(self.params, list(weight_bytes(linear())))
        self.publisher, self.version, self.weights = ParamPublisher(self.trainer), 0, None
        self.name, self.rx, self.receivers = SERVICE_IN, self.params, self.service.receivers
        self.bad = self.transport().sender(self.name)
        sizes = weight_bytes(linear())
        self.shapes = [Shape(({PUBLISH}, COUNTS, EPOCHS_), sizes), Shape(({WANT}, COUNTS))]
        self.templates = [((PUBLISH, 5, 0), [bytes(n) for n in sizes]), ((WANT, 0), [])]

    def send_valid(self, rng) -> None:
        module, self.version = linear(rng), self.version + 1
        self.weights = [f.tobytes() for f in state_frames(module)]
        self.publisher.publish(self.version, module)
        self.pending = self.version

    def poll(self) -> None:
        self.service.poll()
        if self.pending is not None and self.service.version == self.pending:
            self.pending = None

    def check(self) -> None:
        if self.pending is None and self.weights is not None:
            assert self.service.version == self.version
            assert [bytes(f) for f in self.service.latest.frames] == self.weights


class ParamsOut(ParamsIn):
    """params.out: the parameter service's broadcast to a policy's ParamSubscriber."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.worker, self.mine = self.transport(), linear()
        self.subscriber = ParamSubscriber(self.worker, self.mine)
        self.name, self.rx, self.receivers = SERVICE_OUT, self.worker, self.subscriber.receivers
        self.bad = self.params.publisher(SERVICE_OUT)  # the service's own socket: PUB binds the port
        sizes = weight_bytes(linear())
        self.shapes = [Shape((COUNTS, EPOCHS_), sizes)]
        self.templates = [((5, 0), [bytes(n) for n in sizes])]
        self.send_valid(np.random.default_rng(0))  # until subscribed: a late joiner asks (WANT)
        until(lambda: self.pending is None, lambda: (self.wait(), self.poll()), "the first weights")

    def poll(self) -> None:
        self.service.poll()
        if self.subscriber.poll(self.mine):
            assert self.subscriber.version == self.pending
            self.pending = None

    def check(self) -> None:
        if self.pending is None:
            assert self.subscriber.version == self.version
            assert [f.tobytes() for f in state_frames(self.mine)] == self.weights


BATCH = batch_fields(FieldSpec((3,), np.float32), FieldSpec((), np.int64))
SERVED = [name for name in BATCH if name != C.PRIORITY]


def batch_slots() -> list[dict[str, np.ndarray]]:
    return [{n: np.zeros((4, *f.shape), f.dtype) for n, f in BATCH.items()} for _ in range(2)]


class Batches(Harness):
    """trainer.batches: the buffer's BatchServer to the replay trainer's BatchClient."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.buffer, self.trainer = self.transport(), self.transport()
        self.server = BatchServer(self.buffer, batch_slots())
        self.client = BatchClient(self.trainer, batch_slots())
        self.expected, self.env_steps = batch_slots(), 0
        self.name, self.rx, self.receivers = BATCHES_NAME, self.trainer, self.client.receivers
        self.bad = self.transport().sender(self.name)
        sizes = nbytes(self.server.slots[0], SERVED)
        self.shapes = [Shape((range(2), COUNTS), sizes)]
        self.templates = [((1, 9), [bytes(n) for n in sizes])]

    def send_valid(self, rng) -> None:
        slot = self.server.acquire()
        assert slot is not None, "every batch slot was released"
        randomize(self.server.slots[slot], BATCH, rng)
        for name in BATCH:
            self.expected[slot][name][...] = self.server.slots[slot][name]
        self.env_steps += 1
        self.server.send(slot, self.env_steps)
        self.pending = (slot, self.env_steps)

    def poll(self) -> None:
        for slot, env_steps in self.client.poll(limit=4):
            assert (slot, env_steps) == self.pending, f"delivered {(slot, env_steps)}, sent {self.pending}"
            assert equal(self.client.slots[slot], self.expected[slot], SERVED)
            self.client.release(slot)
            back: list = []

            def take_releases(back: list = back) -> None:
                self.buffer.wait(self.server.receivers, 0.005)
                back.extend(self.server.released())

            until(lambda back=back: bool(back), take_releases, "a release")
            assert back == [slot]
            self.pending = None

    def check(self) -> None:
        assert all(equal(c, e, SERVED) for c, e in zip(self.client.slots, self.expected))


class Priorities(Batches):
    """buffer.released: the replay trainer's releases, with the priorities it wrote."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.name, self.rx, self.receivers = RELEASED_NAME, self.buffer, self.server.receivers
        self.bad = self.transport().sender(self.name)
        sizes = nbytes(self.server.slots[0], [C.PRIORITY])
        self.shapes = [Shape((range(2),), sizes)]
        self.templates = [((1,), [bytes(n) for n in sizes])]

    def send_valid(self, rng) -> None:
        super().send_valid(rng)
        slot = self.pending[0]
        got: list = []
        until(lambda: bool(got), lambda: (self.trainer.wait(self.client.receivers, 0.005),
                                          got.extend(self.client.poll(limit=4))), "a batch")  # fmt: skip
        randomize(self.client.slots[slot], [C.PRIORITY], rng)
        self.expected[slot][C.PRIORITY][...] = self.client.slots[slot][C.PRIORITY]
        self.client.release(slot)
        self.pending = slot

    def poll(self) -> None:
        for slot in self.server.released():
            assert slot == self.pending, f"released {slot}, sent {self.pending}"
            self.pending = None

    def check(self) -> None:
        assert all(equal(s, e, [C.PRIORITY]) for s, e in zip(self.server.slots, self.expected))


def report_graph(tmp_path):
    return build_graph(build_config({"experiment": "malformed", "run_dir": str(tmp_path / "run")}))


def actor_report(steps: int, returns: list[float]) -> dict:
    return {"env_steps": steps, "episode_returns": returns, "episode_lengths": [7] * len(returns)}


WRONG = {  # values of the wrong type, or out of bounds, for a field the controller computes with
    "env_steps": ["12", -1, 2**64, 1.5, None, [3]],
    "episode_returns": ["1.0", [1.0, "x"], None, [2**64], 1.0],
    "episode_lengths": [[-1], [1.5], ["7"], 7],
    "episodes": [-1, "3", 0],  # 0: fewer than the returns it carries
    "segments_lost": [-3, "x"],
    "env_time_s": [-1.0, "x", 1e300],
    "time_breakdown": [5, {"env": "x"}, [1.0]],
    "rejected_messages": [{"q": -1}, {"q": "x"}, ["q"]],
    "dropped_messages": [{"q": -1}, {"q": 2**64}, ["q"], "x"],  # a list or text: .items() raised in the controller
}
NOT_JSON = [b"", b"\xff\xfe", b"{", b"[1, 2]", b'"report"', b"null", b"[" * 50_000, b'{"a": ' * 50_000]


def bad_reports() -> list[st.SearchStrategy]:
    """Reports the controller cannot read, with a header that fits: malformed by construction."""

    def report(payload: dict, kind=Kind.REPORT, worker=(Role.ACTOR, 0)) -> tuple:
        return (kind, *worker), [json.dumps(payload).encode()]

    good = actor_report(5, [1.0])
    missing = st.sampled_from(list(good)).map(lambda key: report({k: v for k, v in good.items() if k != key}))
    wrong = st.sampled_from([(k, v) for k, vs in WRONG.items() for v in vs]).map(
        lambda kv: report({**good, kv[0]: kv[1]}))
    unpaired = st.sampled_from([  # lists that differ in length; more than the last 100 (all a report carries)
        report({"env_steps": 1, "episode_returns": [1.0], "episode_lengths": []}),
        report({**actor_report(1, [1.0] * 101), "episodes": 500})])
    not_json = st.sampled_from(NOT_JSON).map(lambda raw: ((Kind.FINAL, Role.ACTOR, 0), [raw]))
    error_payloads = [{"write_failed": 5}, {"write_failed": [28, "full"]}, {"traceback": 5}, {"halt": [1]}]
    errors = st.sampled_from(error_payloads).map(lambda p: report(p, Kind.ERROR, (Role.TRAINER, 0)))
    # a worker this run does not have: a second trainer, a hundredth actor, an evaluator, a buffer
    strangers = st.sampled_from([(Role.TRAINER, 1), (Role.ACTOR, 99), (Role.EVAL, 0), (Role.BUFFER, 0)]).map(
        lambda worker: report(good, worker=worker))
    trainer = st.just(report({"updates": 3}, worker=(Role.TRAINER, 0)))  # no segments_dropped
    return [missing, wrong, unpaired, not_json, errors, strangers, trainer]


class Reports(Harness):
    """controller.in: a worker's WorkerLink to the controller's Supervisor (and its monitor)."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        graph = report_graph(tmp_path)
        lives = Incarnations([w.name for w in graph.workers])
        self.controller, self.worker = self.transport(), self.transport()
        inbox, monitor = self.controller.receiver(CONTROLLER_IN), RunMonitor(graph.config)
        self.supervisor = Supervisor(graph, monitor, self.controller, inbox, FakeWorkers(lives), lives)
        self.link = WorkerLink(self.worker, Role.ACTOR, 0)
        self.steps = self.episodes = 0
        self.name, self.rx, self.receivers = CONTROLLER_IN, self.controller, [self.supervisor.inbox]
        self.bad = self.transport().sender(self.name)
        workers: dict[int, set[int]] = {}
        for w in graph.workers:
            workers.setdefault(int(w.role), set()).add(w.index)
        self.shapes = [Shape((set(map(int, Kind)), {role}, indices), (None,), json_object)
                       for role, indices in workers.items()]  # fmt: skip
        self.templates = [((Kind.REPORT, Role.ACTOR, 0), [json.dumps(actor_report(1, [])).encode()])]
        self.constructed_bad = bad_reports()

    def rejected(self) -> int:
        counts = self.supervisor.monitor.rejected  # drain feeds the controller's drops to the monitor
        assert set(counts) <= {self.name}, counts
        return counts.get(self.name, 0)

    def send_valid(self, rng) -> None:
        returns = [float(r) for r in rng.normal(size=int(rng.integers(0, 3)))]
        steps = int(rng.integers(1, 100))
        self.link.send(Kind.REPORT, actor_report(steps, returns))
        self.steps, self.episodes = self.steps + steps, self.episodes + len(returns)
        self.pending = self.steps

    def poll(self) -> None:
        self.supervisor.drain()
        if self.supervisor.monitor.env_steps == self.pending:
            self.pending = None

    def check(self) -> None:
        monitor = self.supervisor.monitor
        assert (monitor.env_steps, monitor.episodes.count) == (self.steps, self.episodes)
        assert self.supervisor.errors == {} and self.supervisor.write_fault is None


class Commands(Harness):
    """control.out: the controller's broadcast (epochs, stop) to a worker's WorkerLink."""

    def __init__(self, wire, tmp_path) -> None:
        super().__init__(wire, tmp_path)
        self.controller, self.worker = self.transport(), self.transport()
        self.epochs = np.zeros(3, np.int64)  # this worker's copy
        self.sent = self.epochs.copy()
        self.link = WorkerLink(self.worker, Role.ACTOR, 0, self.epochs)
        self.name, self.rx, self.receivers = CONTROL_OUT, self.worker, self.link.receivers
        self.bad = self.controller.publisher(CONTROL_OUT)  # the controller's own socket: PUB binds the port

        def pairs_in_bounds(frames) -> bool:  # 1 to 3 (position, epoch) pairs of this run's 3 workers
            if len(frames[0]) % 16 or not 16 <= len(frames[0]) <= 16 * 3:
                return False
            pairs = np.frombuffer(frames[0], np.int64).reshape(-1, 2)
            return bool(((pairs[:, 0] >= 0) & (pairs[:, 0] < 3) & (pairs[:, 1] >= 0) & (pairs[:, 1] < 2**31)).all())

        self.shapes = [Shape(({STOP},)), Shape(({EPOCHS},), (None,), pairs_in_bounds)]
        self.templates = [((EPOCHS,), [self.pairs()]), ((STOP,), [])]
        self.send_valid(np.random.default_rng(0))  # until subscribed (a PUB drops what no one takes)
        resend = lambda: self.bad.send((EPOCHS,), [self.pairs()])  # noqa: E731
        until(lambda: self.pending is None, lambda: (resend(), self.wait(), self.poll()), "the first epochs")

    def pairs(self) -> bytes:
        """Every worker's (position, epoch) as sent, in one EPOCHS frame."""
        return np.stack([np.arange(len(self.sent)), self.sent], axis=1).astype(np.int64).tobytes()

    def send_valid(self, rng) -> None:
        self.sent = self.sent + rng.integers(1, 3, self.sent.shape)
        self.bad.send((EPOCHS,), [self.pairs()])  # what the controller sends after restarts
        self.pending = self.sent

    def poll(self) -> None:
        assert not self.link.poll_stop(), "stopped by a malformed message"
        if self.pending is not None and (self.epochs == self.pending).all():
            self.pending = None

    def check(self) -> None:
        if self.pending is None:
            assert (self.epochs == self.sent).all()


HARNESSES = [Samples, Releases, Requests, Replies, ParamsIn, ParamsOut, Batches, Priorities, Reports,
             Commands]  # fmt: skip


@pytest.mark.parametrize("harness", HARNESSES, ids=lambda h: h.__name__)
def test_malformed_signed_messages_are_dropped_and_counted_never_raised(harness, tmp_path):
    h = harness(loopback_wire(), tmp_path)
    try:

        @FUZZ
        @given(events(h))
        def fuzz(evs) -> None:
            play(h, evs)

        fuzz()
        assert h.bad_sent >= 40 and h.valid_sent >= 10, (h.bad_sent, h.valid_sent)
        assert h.rejected() == h.bad_sent
        if isinstance(h, Commands):  # a STOP still stops it
            h.bad.send((STOP,))
            until(lambda: h.link.stopping, lambda: (h.wait(), h.link.poll_stop()), "STOP")
    finally:
        h.close()


# ------------------------------------------------------------------------ a whole run


def malformed_for(name: str, rng) -> list[tuple[tuple[int, ...], list[bytes]]]:
    """20 signed messages that no receiver of stream `name` may take: a few that name what does not
    exist or carry the wrong frames (each raised in the receiver before), then headers of -1s
    (no field of any stream may be negative) of random lengths with random frames."""
    near = {
        samples_name(0): [((0, 0, 99, 0, 0), []), ((0, 0, 0), []), ((5, 0, 0, 0, 0), []),
                          ((0, 0, 0, 0, 2**40), [])],
        released_name(0): [((0,), []), ((0, 99, 0, 0), []), ((-1, 0, 0, 0), [])],
        requests_name(0): [((0, 9, 0, 1, 0), []), ((3, 0, 0, 1, 0), []), ((0, 0, -1, 1, 0), [b"obs"])],
        replies_name(0): [((5, 0, 0), []), ((0,), []), ((0, 1, 0), [b"x", b"y", b"z"])],
        SERVICE_IN: [((PUBLISH, 10**9, 0), [b"x"]), ((PUBLISH, 7), []), ((9, 0), [])],
        CONTROLLER_IN: [((Kind.REPORT, Role.ACTOR, 0), [b"{}"]), ((Kind.REPORT, Role.ACTOR, 7), [b"{}"]),
                        ((Kind.ERROR, Role.TRAINER, 0), [b'{"write_failed": 5}']),
                        ((Kind.FINAL, Role.ACTOR, 0), [b"["])],
    }[name]  # fmt: skip
    def frames() -> list[bytes]:
        return [rng.bytes(int(rng.integers(0, 64))) for _ in range(rng.integers(0, 4))]

    return near + [((-1,) * int(rng.integers(1, 12)), frames()) for _ in range(20 - len(near))]


def _stepping(metrics: Path) -> bool:
    lines = metrics.read_text().splitlines() if metrics.exists() else []
    return bool(lines) and json.loads(lines[-1])["env_steps"] > 0


def _inject(wire, streams: list[str], sent: Counter, done: threading.Event, stop: threading.Event,
            metrics: Path) -> None:  # fmt: skip
    """A sender with the run's key: each stream's malformed messages, once the workers report (so
    every stream's owner has bound), a few milliseconds apart. srl's sender on params.in keeps
    only its newest message while one waits (NEWEST_ONLY): there the first waits a second for its
    connection and the rest go 0.1 s apart, or on a loaded machine (load 25 on 2 cores) one in four
    was replaced before it left and the count fell short."""
    rng = np.random.default_rng(0)
    while not stop.is_set() and not _stepping(metrics):
        time.sleep(0.05)
    transport = TcpTransport(wire)
    try:
        for name in streams:
            sender = transport.sender(name)
            newest_only = name in NEWEST_ONLY
            for i, (header, frames) in enumerate(malformed_for(name, rng)):
                sender.send(header, frames)
                sent[name] += 1
                time.sleep((1.0 if i == 0 else 0.1) if newest_only else 0.005)
        done.set()
        stop.wait(120)
    finally:
        transport.close()


def _run_over_tcp_with(beside_the_wire, send: Callable[..., None], run_dir: Path, overrides: list[str]) -> int:
    """`srl run cartpole-ppo` over tcp (in this process, its workers forked from it) with
    `send(wire, stop)` on a thread of the test from the moment the run's wire is made; the
    exit code. `stop` is set when the run has ended."""
    from srl.cli import main

    with beside_the_wire(send):
        return main(["run", "cartpole-ppo", "dataflow.transport=tcp", "stop.target_return=null", f"run.run_dir={run_dir}",
                     "monitor.display=off", "monitor.log_interval_s=0.5", *overrides])  # fmt: skip


def test_a_run_over_tcp_drops_and_counts_malformed_signed_messages_on_every_stream(run_dir, beside_the_wire):
    """`srl run cartpole-ppo dataflow.transport=tcp`, its policy worker and parameter service included,
    receives 120 malformed messages signed with its secret on every stream a worker or the
    controller listens on. Before, the first one of most streams raised in its receiver: the
    worker crash-looped (or the controller died). Now the run finishes normally, with no
    restart, and summary.json counts every one of them on its stream."""
    streams = [samples_name(0), released_name(0), requests_name(0), replies_name(0), SERVICE_IN,
               CONTROLLER_IN]  # fmt: skip
    sent: Counter = Counter()
    done = threading.Event()

    def inject(wire, stop: threading.Event) -> None:
        _inject(wire, streams, sent, done, stop, run_dir / "metrics.jsonl")

    overrides = ["dataflow.inference=policy_worker", "stop.total_env_steps=60000", "launch.heartbeat_timeout_s=30"]
    assert _run_over_tcp_with(beside_the_wire, inject, run_dir, overrides) == 0
    assert done.is_set() and sum(sent.values()) >= 100, sent
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts"] == {}, summary["restarts"]
    assert summary["env_steps"] >= 20000
    assert summary["rejected_messages"] >= sum(sent.values()), (summary["rejected_messages_by_stream"], sent)
    by_stream = summary["rejected_messages_by_stream"]
    assert all(by_stream.get(name, 0) >= n for name, n in sent.items()), (by_stream, sent)


# ------------------------------------------------------------------------ counts a worker can have made


def test_dropped_messages_of_the_wrong_type_are_refused():
    """The controller reads dropped_messages as {stream: count} (RunMonitor.on_dropped): text or a
    list there raised AttributeError in the controller, as the checks passed it through."""
    from srl.launch.reports import payload_problem

    for wrong in WRONG["dropped_messages"]:
        problem = payload_problem(Kind.REPORT, Role.ACTOR, {**actor_report(1, []), "dropped_messages": wrong})
        assert problem is not None and "dropped_messages" in problem, wrong


def test_report_bounds_hold_each_workers_sums_to_what_it_can_have_done():
    """ReportBounds fed by hand, on a clock of the test's: each worker's sum of a count stays within
    its rate x its units x (seconds since the launch + slack); a report past it is refused whole
    (nothing of it charged), and the budget grows with the time."""
    from srl.launch.reports import ENV_STEPS_PER_ENV_S, EVENTS_PER_WORKER_S, SLACK_S, ReportBounds

    now = [100.0]
    actor, trainer, pod, custom = (Role.ACTOR, 0), (Role.TRAINER, 0), (Role.POD, 0), (Role.CUSTOM, 0)
    units = {(int(r), i): {"envs": e, "rows": 2 * e, "worker": 1} for (r, i), e in
             [(actor, 16), (trainer, 0), (pod, 4), (custom, 0)]}  # fmt: skip
    bounds = ReportBounds(units, started_s=100.0, clock=lambda: now[0])
    steps = int(16 * ENV_STEPS_PER_ENV_S * SLACK_S)  # all an actor of 16 envs may report at once at the start
    assert bounds.problem(*actor, actor_report(steps // 2, [])) is None
    assert bounds.problem(*actor, actor_report(steps // 2, [])) is None
    problem = bounds.problem(*actor, {**actor_report(1, [1.0]), "episodes": 1})
    assert problem is not None and problem.startswith("a report of actor:0 past what it can have done: env_steps 1 "), problem
    assert bounds.used[(int(Role.ACTOR), 0)] == {"env_steps": steps}  # the refused report: nothing charged
    now[0] += 1.0  # one more second: 16 million more steps, 32 million episodes (2 agents)
    assert bounds.problem(*actor, {**actor_report(16_000_000, [1.0]), "episodes": 32_000_000}) is None
    assert bounds.problem(*actor, {**actor_report(0, []), "nonfinite_episodes_skipped": 352_000_001}) is not None
    # the two forged reports of issue 38: each a valid count, their sum past int64
    forged = actor_report(2**63 - 1, [])
    assert bounds.problem(*actor, forged) is not None and bounds.problem(*actor, forged) is not None
    # updates, per worker; the trainer reports no env steps, and a custom worker's are not summed
    updates = int(EVENTS_PER_WORKER_S * (SLACK_S + 1))
    assert bounds.problem(*trainer, {"updates": updates + 1, "segments_dropped": 0}) is not None
    assert bounds.problem(*trainer, {"updates": updates, "segments_dropped": 0}) is None
    assert bounds.problem(*custom, {"env_steps": 10**15}) is None
    # seconds: a worker's time is at most the run's (11 s here)
    assert bounds.problem(*trainer, {"updates": 0, "segments_dropped": 0, "train_time_s": 11.5}) is not None
    assert bounds.problem(*custom, {"time_breakdown": {"waiting": 6.0, "other": 5.0}}) is None
    assert bounds.problem(*custom, {"time_breakdown": {"waiting": 0.5}}) is not None
    assert bounds.problem(*custom, {"rejected_messages": {"samples.0": 10**12}}) is not None
    # a pod: refused whole when one count is past its bound (its env steps are fine)
    assert bounds.problem(*pod, {**actor_report(1000, []), "updates": 10**12, "segments_dropped": 0}) is not None
    assert bounds.used[(int(Role.POD), 0)] == {}


def test_the_controller_drops_and_counts_reports_past_their_bound(tmp_path):
    """Through the controller's inbox (Supervisor over a tcp loopback, a worker's WorkerLink): two
    signed reports with env_steps 2^63 - 1 each are dropped and counted on controller.in; the
    honest reports around them are summed."""
    h = Reports(loopback_wire(), tmp_path)
    try:
        monitor = h.supervisor.monitor
        for steps in (10, 2**63 - 1, 2**63 - 1, 20):
            h.link.send(Kind.REPORT, actor_report(steps, []))
        until(lambda: monitor.env_steps == 30 and h.rejected() == 2, lambda: (h.wait(), h.supervisor.drain()),
              "the honest reports and both drops")
        assert monitor.env_steps == 30 and h.rejected() == 2
    finally:
        h.close()


def _forge(wire, stop: threading.Event, sent: list, metrics: Path) -> None:
    """A sender with the run's key: two reports of actor 0 with env_steps 2^63 - 1, once the run steps."""
    while not stop.is_set() and not _stepping(metrics):
        time.sleep(0.05)
    transport = TcpTransport(wire)
    try:
        sender = transport.sender(CONTROLLER_IN)
        for _ in range(2):
            sender.send((Kind.REPORT, Role.ACTOR, 0), [json.dumps(actor_report(2**63 - 1, [])).encode()])
            sent.append(1)
            time.sleep(0.01)
        stop.wait(60)
    finally:
        transport.close()


def test_a_run_over_tcp_drops_two_forged_reports_past_int64(run_dir, beside_the_wire):
    """Issue 38: a holder of the run's secret sent two reports of env_steps 2^63 - 1; summary.json's
    env_steps went past the int64 range (and the run stopped at once, its budget "reached"). Now
    both are dropped and counted, and the run goes on to its time limit on its own steps."""
    sent: list = []

    def forge(wire, stop: threading.Event) -> None:
        _forge(wire, stop, sent, run_dir / "metrics.jsonl")

    overrides = ["stop.total_env_steps=1000000000", "stop.time_limit_s=6", "monitor.learning_curve=false"]
    assert _run_over_tcp_with(beside_the_wire, forge, run_dir, overrides) == 0
    assert len(sent) == 2
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("time_limit_s"), summary["stop_reason"]
    assert 0 < summary["env_steps"] < 10**8, summary["env_steps"]  # the actor's own (it does ~10^4 a second)
    assert summary["rejected_messages_by_stream"] == {CONTROLLER_IN: 2}, summary["rejected_messages_by_stream"]
