"""The controller's per-worker costs stay O(N) (issue 34): counted, not timed.

- over tcp, epochs go out once after a restart, as pairs of the workers restarted, and then a
  bounded number of pairs a second: never the whole vector (8 N bytes) to each of N peers each second;
- workers that end together (a lost node's) cost one wait for their error reports and one
  broadcast, not 0.2 s and a broadcast each;
- under Ray, one ray.wait over every worker's run per loop, and each worker's ports asked for at once;
- a policy worker or trainer of 2,000 actors opens its sockets: ZeroMQ's context is sized by the
  graph (its default of 1,023 stopped it), and a process past its declared count gets a clear error;
- every worker's heartbeat is looked at a few times a second, not on every turn of the loop (a
  turn per drain: up to a thousand a second while reports stream in, each O(N));
- a report's JSON is parsed once, by the inbox's check, not again by its reader.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from srl.config import ConfigError
from srl.config.checks import build_config
from srl.graph import build_graph
from srl.launch.monitor import RunMonitor
from srl.launch.supervise import (
    EPOCHS_RESEND_PAIRS,
    EPOCHS_RESEND_S,
    ERROR_REPORT_WAIT_S,
    POLL_S,
    SILENCE_CHECK_S,
    Supervisor,
)
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, EPOCHS, Kind, Role, WorkerLink
from srl.streams.incarnations import Incarnations
from srl.streams.inline import InlineTransport


class FakeClock:
    """Stands in for the supervisor's `time`: sleeps only move it, and are counted."""

    def __init__(self) -> None:
        self.now_s, self.slept = 1000.0, []

    def monotonic(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_s += seconds

    def time_ns(self) -> int:
        return int(self.now_s * 1e9)

    def time(self) -> float:
        return self.now_s


class TcpLikeTransport(InlineTransport):
    """In-process queues, but each process keeps its own epochs (as over tcp): the supervisor broadcasts them."""

    shares_memory = False


class FakeWorkers:
    """A test sets `codes[name]` to make a worker end; starts and kills are logged."""

    def __init__(self, lives):
        self.lives, self.codes, self.log = lives, {}, []

    def start(self, spec, graph):
        self.log.append(("start", spec.name, self.lives.of(spec.name)))
        self.codes.pop(spec.name, None)

    def ended(self):
        return dict(self.codes)

    def exit_code(self, name):  # what the supervisor asked before issue 34 (so these tests run on it too)
        return self.codes.get(name)

    def kill(self, name):
        self.log.append(("kill", name, self.lives.of(name)))


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr("srl.launch.supervise.time", fake)
    monkeypatch.setattr("srl.launch.monitor.time", fake)
    return fake


def supervised(actors: int):
    config = build_config({"experiment": "s", "run": {"run_dir": "/tmp/s"}, "dataflow": {"transport": "tcp"},
                           "launch": {"num_actor_workers": actors, "max_restarts": 3}})  # fmt: skip
    graph = build_graph(config)
    transport, lives = TcpLikeTransport(), Incarnations([w.name for w in graph.workers])
    workers = FakeWorkers(lives)
    peer = transport.subscriber(CONTROL_OUT)  # what one worker receives
    supervisor = Supervisor(graph, RunMonitor(graph.config), transport, transport.receiver(CONTROLLER_IN),
                            workers, lives)  # fmt: skip
    return supervisor, workers, transport, peer


def epochs_bytes(peer) -> tuple[int, int]:
    """(EPOCHS messages, bytes of their frames) waiting for one peer."""
    messages = [m for m in peer.recv_all() if m.header[0] == EPOCHS]
    return len(messages), sum(len(f) for m in messages for f in m.frames)


def run_for(supervisor, clock, seconds: float) -> None:
    """The supervisor's epochs duty over `seconds` of its loop (POLL_S apart)."""
    for _ in range(round(seconds / POLL_S)):
        clock.now_s += POLL_S
        supervisor._rebroadcast_epochs()


def test_after_a_restart_epochs_go_out_once_then_a_bounded_number_of_bytes_a_second(clock):
    actors = 2000
    supervisor, workers, _, peer = supervised(actors)
    workers.codes["actor:7"] = -9
    supervisor.check()
    assert epochs_bytes(peer) == (1, 16)  # one pair: (actor:7's position, epoch 1)
    seconds = 60
    run_for(supervisor, clock, seconds)
    messages, sent = epochs_bytes(peer)
    assert messages <= seconds / EPOCHS_RESEND_S + 1
    assert sent <= 16 * min(EPOCHS_RESEND_PAIRS, 1) * messages
    assert sent < 8 * actors  # less in a minute than the whole vector once (sent every second before)


def test_a_peer_that_missed_the_broadcast_catches_up_from_the_resent_pairs(clock):
    supervisor, workers, transport, _ = supervised(64)
    for a in range(40):
        workers.codes[f"actor:{a}"] = -9
    supervisor.check()  # its broadcast goes out before the late peer subscribes: missed
    late = Incarnations([w.name for w in supervisor.graph.workers])
    link = WorkerLink(transport, Role.ACTOR, 50, late.epochs)
    assert not link.poll_stop() and late.of("actor:3") == 0
    turns = -(-40 // EPOCHS_RESEND_PAIRS)  # each resend a loop late at most
    run_for(supervisor, clock, turns * (EPOCHS_RESEND_S + POLL_S))
    link.poll_stop()
    assert late.epochs.tolist() == supervisor.incarnations.epochs.tolist()
    assert [late.of(f"actor:{a}") for a in (0, 39, 40)] == [1, 1, 0]


def test_a_lost_node_s_workers_cost_one_wait_and_one_broadcast(clock):
    supervisor, workers, _, peer = supervised(256)
    lost = [f"actor:{a}" for a in range(0, 256, 2)]  # 128 workers of a node, ended together
    for name in lost:
        workers.codes[name] = -9
    supervisor.check()
    assert sum(clock.slept) == pytest.approx(ERROR_REPORT_WAIT_S)  # not 128 x 0.2 s
    assert epochs_bytes(peer) == (1, 16 * len(lost))  # one broadcast of their pairs
    assert [n for what, n, epoch in workers.log if what == "start" and epoch == 1] == lost


class FakeRay:
    """Ray's calls the launcher makes, counted; `done` names the runs that have ended."""

    class exceptions:  # noqa: N801  (Ray's own name)
        RayActorError = RuntimeError

    def __init__(self):
        self.waits, self.gets, self.done = [], [], set()

    def wait(self, refs, num_returns=1, timeout=None):
        self.waits.append(len(refs))
        ready = [r for r in refs if r in self.done]
        return ready, [r for r in refs if r not in self.done]

    def get(self, refs, timeout=None):
        self.gets.append(refs)
        if isinstance(refs, list):
            return [r() for r in refs]
        if callable(refs):
            return refs()
        if refs in self.done and refs.startswith("run:"):
            raise RuntimeError("killed")
        return None


def test_under_ray_one_wait_over_every_worker_s_run_per_loop(clock):
    from srl.launch.ray_launcher import RayWorkers

    supervisor, _, _, _ = supervised(300)
    ray = FakeRay()
    workers = RayWorkers.__new__(RayWorkers)  # its Ray calls only: no cluster
    workers.ray, workers.details, workers.placement = ray, {}, {}
    workers.runs = {name: f"run:{name}" for name in supervisor.specs}
    workers.start = lambda spec, graph: workers.runs.__setitem__(spec.name, f"run:{spec.name}:again")
    workers.kill = lambda name: None
    supervisor.workers = workers
    supervisor.check()
    assert ray.waits == [len(supervisor.specs)]  # one wait over all, not one per worker
    ray.done.add("run:actor:5")
    supervisor.check()
    assert len(ray.waits) == 2 and workers.runs["actor:5"] == "run:actor:5:again"
    assert "its Ray actor died" in workers.details["actor:5"]


def test_under_ray_every_worker_s_ports_are_asked_for_at_once():
    from srl.launch.ray_streams import place_streams
    from srl.streams.tcp import Wire

    graph = build_graph(build_config({"experiment": "s", "run": {"run_dir": "/tmp/s"}, "dataflow": {"transport": "tcp"},
                                      "launch": {"num_actor_workers": 50}}))  # fmt: skip
    ray = FakeRay()

    class Actor:
        def __init__(self):
            self.where = type("M", (), {"remote": staticmethod(lambda: (lambda: {"host": "127.0.0.1"}))})
            self.free_ports = type("M", (), {"remote": staticmethod(lambda host, n: (lambda: list(range(n))))})

    actors = {w.name: Actor() for w in graph.workers}
    wire = place_streams(ray, graph, actors, "127.0.0.1", Wire(b"k" * 32, {}))
    assert len(ray.gets) == 2  # where every actor is, then every actor's ports: not one round trip each
    owned = {s.name for s in graph.streams if s.via == "transport"}
    assert set(wire.ports) == owned


def test_a_policy_worker_and_a_trainer_of_2000_actors_open_their_sockets(tmp_path):
    from srl.launch.shell import open_transport
    from srl.streams.inference import InferenceServer
    from srl.streams.samples import released_name

    actors = 2000
    graph = build_graph(build_config({"experiment": "s", "run": {"run_dir": str(tmp_path)},
                                      "launch": {"num_actor_workers": actors},
                                      "dataflow": {"inference": "policy_worker"}}))  # fmt: skip
    transport = open_transport(graph, "sockets", tmp_path)
    try:
        InferenceServer(transport, 0, list(range(actors)))  # 2,001 sockets: past ZeroMQ's default 1,023
        senders = [transport.sender(released_name(a)) for a in range(30)]  # within the spare
        assert len(senders) == 30
    finally:
        transport.close()
    assert graph.sockets_per_process() > actors  # the policy worker: a reply socket per actor, and its own


def test_a_process_past_its_declared_sockets_gets_a_clear_error(tmp_path):
    from srl.streams.local import SPARE_SOCKETS, LocalTransport

    transport = LocalTransport("over", tmp_path, max_sockets=2000)
    try:
        with pytest.raises(RuntimeError, match=r"actor\.\d+\.replies.*zmq\.MAX_SOCKETS"):
            for a in range(2000 + SPARE_SOCKETS + 1):
                transport.sender(f"actor.{a}.replies")
    finally:
        transport.close()


def test_a_run_whose_process_would_open_more_sockets_than_zeromq_allows_is_refused(monkeypatch):
    from srl.graph.machine import check_machine

    graph = build_graph(build_config({"experiment": "s", "run": {"run_dir": "/tmp/s"}}))
    monkeypatch.setattr(type(graph), "sockets_per_process", lambda self: 70_000)
    with pytest.raises(ConfigError, match=r"num_actor_workers=1.*70064 sockets.*zmq.SOCKET_LIMIT"):
        check_machine(graph)


def test_epoch_pairs_naming_no_worker_of_the_run_are_dropped():
    transport = InlineTransport()
    mine = np.zeros(3, np.int64)
    link = WorkerLink(transport, Role.ACTOR, 0, mine)
    broadcast = transport.publisher(CONTROL_OUT)
    broadcast.send((EPOCHS,), [np.array([[1, 4], [2, 2]], np.int64).tobytes()])
    broadcast.send((EPOCHS,), [np.array([[3, 9]], np.int64).tobytes()])  # position 3: no such worker
    broadcast.send((EPOCHS,), [np.array([[0, -1]], np.int64).tobytes()])  # no negative epoch
    broadcast.send((EPOCHS,), [b"\0" * 24])  # not whole pairs
    broadcast.send((EPOCHS,), [np.array([[1, 2]], np.int64).tobytes()])  # older: epochs only grow
    link.poll_stop()
    assert mine.tolist() == [0, 4, 2]
    assert sum(transport.take_rejected().values()) == 3


def test_one_drain_reads_a_bounded_number_of_reports(monkeypatch):
    """A controller whose workers report faster than it reads still goes round its loop (its
    heartbeat checks, restarts, stop rules): one drain takes at most DRAIN_LIMIT reports."""
    monkeypatch.setattr("srl.launch.supervise.DRAIN_LIMIT", 5, raising=False)
    supervisor, _, transport, _ = supervised(4)
    link = WorkerLink(transport, Role.ACTOR, 0)
    for _ in range(12):
        link.send(Kind.REPORT, {"env_steps": 1, "episode_returns": [], "episode_lengths": []})
    supervisor.drain()
    assert supervisor.monitor.env_steps == 5
    supervisor.drain(), supervisor.drain()
    assert supervisor.monitor.env_steps == 12


def test_heartbeats_are_looked_at_a_few_times_a_second_not_on_every_loop(clock):
    """The loop turns once per drain, up to a thousand times a second while reports stream in;
    looking at all N heartbeats on each turn cost 4,096 workers more than their reports. A silent
    worker is still found within SILENCE_CHECK_S of its timeout."""
    supervisor, workers, _, _ = supervised(2000)
    monitor, names = supervisor.monitor, list(supervisor.specs)
    looked: list[int] = []
    silent_workers = monitor.silent_workers
    monitor.silent_workers = lambda workers: looked.append(len(workers)) or silent_workers(workers)
    for _ in range(1000):  # one second of loops 1 ms apart
        clock.now_s += 0.001
        monitor.last_report_s.update(dict.fromkeys(names, clock.now_s))
        supervisor.check()
    assert sum(looked) <= (1 / SILENCE_CHECK_S + 1) * len(names), len(looked)
    timeout_s = supervisor.graph.config.launch.heartbeat_timeout_s
    fell_silent_s = clock.now_s
    while ("kill", "actor:5", 0) not in workers.log and clock.now_s < fell_silent_s + 2 * timeout_s:
        clock.now_s += 0.001
        monitor.last_report_s.update({name: clock.now_s for name in names if name != "actor:5"})
        supervisor.check()
    assert [entry[1] for entry in workers.log if entry[0] == "kill"] == ["actor:5"]
    assert clock.now_s - fell_silent_s <= timeout_s + SILENCE_CHECK_S + 0.002


def test_a_report_s_json_is_parsed_once(monkeypatch):
    """The inbox's check parses each report to check it; the reader takes that payload (parsing
    it again was a seventh of the controller's time a report)."""
    supervisor, _, transport, _ = supervised(4)
    link = WorkerLink(transport, Role.ACTOR, 0)
    for _ in range(10):
        link.send(Kind.REPORT, {"env_steps": 1, "episode_returns": [2.0], "episode_lengths": [3]})
    parsed: list[int] = []
    loads = json.loads
    monkeypatch.setattr(json, "loads", lambda text, *a, **k: parsed.append(1) or loads(text, *a, **k))
    supervisor.drain()
    assert supervisor.monitor.env_steps == 10 and supervisor.monitor.episodes.count == 10
    assert len(parsed) == 10
