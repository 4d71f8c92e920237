"""Restart policy kernel: restarts counted per worker in a sliding window; one more is a crash loop."""

from __future__ import annotations

import numpy as np
import pytest

from srl.config.checks import build_config
from srl.graph import build_graph, lane_of
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import WorkerFailed
from srl.launch.restarts import CrashLoop, RestartPolicy
from srl.launch.supervise import Supervisor
from srl.streams.control import CONTROLLER_IN, Kind, Role, WorkerLink
from srl.streams.incarnations import Incarnations
from srl.streams.inference import InferenceClient, InferenceServer
from srl.streams.inline import InlineTransport
from srl.streams.params import ParamPublisher
from srl.streams.samples import SampleConsumer, SampleProducer


def test_restarts_within_the_window_until_the_limit_then_a_crash_loop():
    policy = RestartPolicy(max_restarts=2, window_s=10)
    assert policy.on_failure("actor:0", 0.0) == 1
    assert policy.on_failure("actor:0", 5.0) == 2
    with pytest.raises(CrashLoop, match=r"restarted 2 times within 10 s .*launch.max_restarts=2"):
        policy.on_failure("actor:0", 9.9)


def test_old_restarts_leave_the_window():
    policy = RestartPolicy(max_restarts=2, window_s=10)
    policy.on_failure("actor:0", 0.0)
    policy.on_failure("actor:0", 5.0)
    assert policy.on_failure("actor:0", 10.0) == 3  # the first one is 10 s old: out of the window
    with pytest.raises(CrashLoop):
        policy.on_failure("actor:0", 14.0)
    assert policy.on_failure("actor:0", 15.0) == 4


def test_workers_are_counted_apart():
    policy = RestartPolicy(max_restarts=1, window_s=60)
    assert policy.on_failure("actor:0", 0.0) == 1
    assert policy.on_failure("actor:1", 0.0) == 1
    assert policy.on_failure("policy:0", 1.0) == 1
    with pytest.raises(CrashLoop):
        policy.on_failure("actor:1", 2.0)
    assert policy.total == {"actor:0": 1, "actor:1": 1, "policy:0": 1}


def test_zero_restarts_makes_every_failure_final():
    with pytest.raises(CrashLoop, match="launch.max_restarts=0"):
        RestartPolicy(max_restarts=0, window_s=60).on_failure("trainer:0", 0.0)


@pytest.mark.parametrize("bad", [(-1, 60.0), (3, 0.0)])
def test_bad_limits_are_refused(bad):
    with pytest.raises(ValueError):
        RestartPolicy(*bad)


# ------------------------------------------------- streams across restarts (no processes, by hand)



def sample_ends(transport, lives):
    slots = {(0, k): {"obs": np.zeros(3, np.float32)} for k in range(2)}  # one split, two slots
    producer = SampleProducer(transport, 0, slots, lives)
    consumer = SampleConsumer(transport, {(0, 0, k): slots[(0, k)] for k in range(2)}, lives)
    return producer, consumer


def test_a_restarted_trainer_drops_samples_meant_for_the_dead_one_and_actors_take_back_their_slots():
    transport, lives = InlineTransport(), Incarnations(["actor:0", "trainer:0"])
    producer, dead = sample_ends(transport, lives)
    for _ in range(2):
        producer.send(0, producer.acquire(0))
    assert producer.acquire(0) is None
    (taken,) = dead.poll(limit=1)  # the trainer takes one segment and dies before releasing it
    lives.bump("trainer:0")
    _, trainer = sample_ends(transport, lives)
    assert trainer.poll(limit=8) == [] and trainer.stale == 1  # the other was sent to the dead one
    dead.release(taken)  # a late release from the dead trainer must not free a slot twice
    assert sorted([producer.acquire(0), producer.acquire(0)]) == [0, 1] and producer.acquire(0) is None
    producer.send(0, 1)
    (ref,) = trainer.poll(limit=8)
    assert (ref.slot, ref.trainer_epoch) == (1, 1)
    trainer.release(ref)
    assert producer.acquire(0) == 1


def test_a_restarted_actor_s_old_samples_and_releases_are_dropped_and_a_racing_copy_is_caught():
    transport, lives = InlineTransport(), Incarnations(["actor:0", "trainer:0"])
    producer, trainer = sample_ends(transport, lives)
    producer.send(0, producer.acquire(0))
    producer.send(0, producer.acquire(0))
    (ref,) = trainer.poll(limit=1)
    lives.bump("actor:0")  # the actor died: the segment still queued is from its dead life
    assert not trainer.current(ref), "a copy taken while the actor restarted must be discarded"
    assert trainer.poll(limit=8) == [] and trainer.stale == 1
    reborn, _ = sample_ends(transport, lives)
    trainer.release(ref)  # meant for the dead life
    assert sorted([reborn.acquire(0), reborn.acquire(0)]) == [0, 1] and reborn.acquire(0) is None


def test_actors_send_unanswered_requests_again_to_a_restarted_policy_worker_which_drops_repeats():
    transport, lives = InlineTransport(), Incarnations(["actor:0", "policy:0"])
    client, dead = InferenceClient(transport, 0, 0, lives), InferenceServer(transport, 0, [0], lives)
    client.request(0, key=0)
    client.request(1, key=0)
    dead.reply(dead.poll(limit=1))  # answers split 0, then dies with split 1 unanswered
    lives.bump("policy:0")
    server = InferenceServer(transport, 0, [0], lives)
    assert client.ready() == [0]  # split 0's reply still counts; split 1 is asked again
    requests = server.poll(limit=8)  # split 1's first copy (still queued) and its repeat: one taken
    assert [(r.split, r.key) for r in requests] == [(1, 0)]
    server.reply(requests)
    assert client.ready() == [1]
    server.reply(requests)  # a late repeat of that reply is not taken for the next request's
    client.request(1, key=1)
    assert client.ready() == []


def test_a_policy_worker_drops_requests_of_a_dead_actor_and_the_new_actor_ignores_old_replies():
    transport, lives = InlineTransport(), Incarnations(["actor:0", "policy:0"])
    client, server = InferenceClient(transport, 0, 0, lives), InferenceServer(transport, 0, [0], lives)
    client.request(0, key=0)
    (old,) = server.poll(limit=8)
    client.request(1, key=0)
    lives.bump("actor:0")
    assert server.poll(limit=8) == []  # split 1's request came from the dead life
    reborn = InferenceClient(transport, 0, 0, lives)
    reborn.request(0, key=0)
    server.reply([old])  # the reply to the dead life's request, same split and key
    assert reborn.ready() == []
    (new,) = server.poll(limit=8)
    server.reply([new])
    assert reborn.ready() == [0]


# ------------------------------------------------- the supervisor with fake workers (no processes)



class FakeWorkers:
    """Records starts and kills; a test sets `codes[name]` to make a worker end."""

    def __init__(self, lives):
        self.lives, self.codes, self.log = lives, {}, []

    def start(self, spec, graph):
        lane = lane_of(graph.lanes, spec.name)  # a policy's worker is built from its lane's graph (srl.graph.build)
        self.log.append(("start", spec.name, self.lives.of(spec.name), lane and lane.graph.config.run.resume))
        self.codes.pop(spec.name, None)

    def ended(self):
        return dict(self.codes)

    def kill(self, name):
        self.log.append(("kill", name, self.lives.of(name)))


def supervised(**fields):
    graph = build_graph(build_config({"experiment": "s", "run_dir": "/tmp/s", **fields}))
    transport, lives = InlineTransport(), Incarnations([w.name for w in graph.workers])
    workers = FakeWorkers(lives)
    supervisor = Supervisor(graph, RunMonitor(graph.config), transport, transport.receiver(CONTROLLER_IN),
                            workers, lives)  # fmt: skip
    return supervisor, workers, transport


def test_a_dead_worker_is_killed_then_its_epoch_bumped_then_started_and_a_trainer_resumes():
    supervisor, workers, _ = supervised(max_restarts=2)
    workers.codes["actor:0"] = -9
    supervisor.check()
    assert workers.log == [("kill", "actor:0", 0), ("start", "actor:0", 1, None)]
    workers.codes["trainer:0"] = -9
    supervisor.check()
    assert workers.log[2:] == [("kill", "trainer:0", 0), ("start", "trainer:0", 1, "/tmp/s")]
    assert supervisor.monitor.restarts == {"actor:0": 1, "trainer:0": 1}
    supervisor.check()  # nothing ended since
    assert len(workers.log) == 4


def test_past_the_limit_the_run_ends_with_the_worker_s_last_traceback(monkeypatch):
    monkeypatch.setattr("srl.launch.supervise.ERROR_REPORT_WAIT_S", 0.0)
    supervisor, workers, transport = supervised(max_restarts=1)
    link = WorkerLink(transport, Role.ACTOR, 0)
    for attempt in ("first", "second"):
        link.send(Kind.ERROR, {"traceback": f"Traceback ...\nRuntimeError: {attempt} boom"})
        workers.codes["actor:0"] = 1
        if attempt == "first":
            supervisor.check()
    last = r"(?s)worker actor:0 failed.*launch.max_restarts=1.*RuntimeError: second boom"
    with pytest.raises(WorkerFailed, match=last):
        supervisor.check()


def test_a_silent_worker_is_restarted(monkeypatch):
    supervisor, workers, _ = supervised(heartbeat_timeout_s=5)
    monkeypatch.setattr(supervisor.monitor, "silent_workers", lambda names: ["params:0"])
    supervisor.check()
    assert workers.log == [("kill", "params:0", 0), ("start", "params:0", 1, None)]


def test_the_trainer_publishes_again_when_the_parameter_service_was_restarted():
    transport, lives = InlineTransport(), Incarnations(["trainer:0", "params:0"])
    publisher = ParamPublisher(transport, generation=0, incarnations=lives)
    assert not publisher.service_restarted()
    lives.bump("params:0")
    assert publisher.service_restarted() and not publisher.service_restarted()


def test_over_tcp_epochs_arrive_by_broadcast_and_only_grow():
    """Each tcp process keeps its own copy: the control stream's EPOCHS (pairs of position and
    epoch) raise it, never lower it, and a receiver meeting a later epoch in a message takes it."""
    from srl.streams.control import CONTROL_OUT, EPOCHS

    transport = InlineTransport()
    mine = Incarnations(["actor:0", "trainer:0"], np.array([0, 2], np.int64))
    link = WorkerLink(transport, Role.ACTOR, 0, mine.epochs)
    broadcast = transport.publisher(CONTROL_OUT)
    broadcast.send((EPOCHS,), [mine.pairs(["actor:0", "trainer:0"]).tobytes()])  # as they are: no change
    broadcast.send((EPOCHS,), [np.array([[0, 1], [1, 1]], np.int64).tobytes()])
    broadcast.send((EPOCHS,), [np.array([[2, 9]], np.int64).tobytes()])  # another graph's worker: ignored
    assert not link.poll_stop()
    assert mine.epochs.tolist() == [1, 2]
    mine.observe("actor:0", 3), mine.observe("trainer:0", 1), mine.observe("policy:0", 5)
    assert (mine.of("actor:0"), mine.of("trainer:0"), mine.of("policy:0")) == (3, 2, 0)
