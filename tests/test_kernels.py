"""Worker kernels driven by hand over one InlineTransport: no processes, no sockets, no timing."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import srl.launch.monitor as monitor_module
from srl import checkpoint
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import FieldSpec
from srl.config.checks import build_config
from srl.data import columns as C
from srl.envs import SerialVectorEnv
from srl.graph import actor_block, build_graph, make_policy, sub_arrays
from srl.launch.monitor import RunMonitor
from srl.streams.control import Role
from srl.streams.inference import InferenceClient, InferenceServer, Request
from srl.streams.inline import InlineTransport
from srl.streams.layout import poison
from srl.streams.params import (
    PUBLISH,
    REPUBLISH_S,
    SERVICE_IN,
    SERVICE_OUT,
    WANT,
    WANT_RETRY_S,
    ParamPublisher,
    ParamSubscriber,
    load_frames,
    tensor_bytes,
)
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.testing import CountingEnv, check_counts
from srl.workers.actor import ActorKernel
from srl.workers.learner import LearnerSettings
from srl.workers.params import ParamServiceKernel
from srl.workers.policy import Acting, PolicyWorkerKernel
from srl.workers.trainer import TrainerKernel

L, T = 3, 4  # counting episode length, sample length
SPLITS, ENVS, AGENTS, SLOTS = 2, 2, 2, 2  # ring splits per actor, envs per split, agents per env, slots
SLOT_COLUMNS = (C.OBS, C.ACTION, C.LOG_PROB, C.VALUE, C.POLICY_VERSION)


def counting_graph():
    return build_graph(build_config({
        "experiment": "kernels", "env": "counting", "env_kwargs": {"episode_length": L, "num_agents": AGENTS},
        "envs_per_actor": SPLITS * ENVS, "ring_splits": SPLITS, "sample_length": T, "segment_slots": SLOTS,
    }))  # fmt: skip


# ------------------------------------------------------------------------------ actor


class FakeInference:
    """Answers every pending request at the next ready(): action and value are functions of the
    obs, version counts the ready() calls, so each recorded row can be traced back."""

    receivers: list = []

    def __init__(self, slots):
        self.slots, self.pending, self.calls = slots, [], 0

    def request(self, split, min_version=0, key=0):
        assert split not in self.pending, "two requests in flight for one split"
        self.pending.append(split)

    def ready(self):
        self.calls += 1
        answered, self.pending = self.pending, []
        for s in answered:
            slot, obs = self.slots[s], self.slots[s][C.OBS]
            slot[C.ACTION][:] = obs[:, 2].astype(np.int64) % 2
            slot[C.LOG_PROB][:] = -obs[:, 1]
            slot[C.VALUE][:] = 100 * obs[:, 0] + 10 * obs[:, 3] + obs[:, 2]
            slot["version"][0] = self.calls
        return answered


def make_actor():
    transport, graph = InlineTransport(), counting_graph()
    arrays = transport.arrays(actor_block(0), graph.actor_layout())
    poison(arrays)  # an unwritten row would show up as NaN / -1
    infer = [sub_arrays(arrays, f"infer.{s}.") for s in range(SPLITS)]
    segments = {(s, k): sub_arrays(arrays, f"sample.{s}.{k}.") for s in range(SPLITS) for k in range(SLOTS)}
    group_envs = lambda g: [CountingEnv(g * ENVS + e, L, AGENTS) for e in range(ENVS)]  # noqa: E731
    envs = [SerialVectorEnv(group_envs(g)) for g in range(SPLITS)]
    producer = SampleProducer(transport, 0, segments)
    kernel = ActorKernel(envs, FakeInference(infer), producer, infer, T, [0] * SPLITS)
    consumer = SampleConsumer(transport, {(0, s, k): seg for (s, k), seg in segments.items()})
    return kernel, consumer


def take(consumer, release=True):
    """The trainer's part: copy each sent segment, release its slot (or hold it)."""
    out = []
    for ref in consumer.poll(limit=100):
        out.append((ref, {k: v.copy() for k, v in consumer.segment(ref).items()}))
        if release:
            consumer.release(ref)
    return out


def test_actor_segments_chain_and_match_the_counting_envs():
    """Obs rows are contiguous per env, row T of a segment is row 0 of the next one of its split,
    rewards / flags / policy outputs line up with the obs, report() counts steps and episodes."""
    kernel, consumer = make_actor()
    kernel.start()
    polls, got = 30, []
    for _ in range(polls):
        kernel.poll()
        got += take(consumer)
    chains = {s: [seg for ref, seg in got if ref.split == s] for s in range(SPLITS)}
    assert [len(c) for c in chains.values()] == [(polls - 1) // T] * SPLITS
    segs = [seg for _, seg in got]
    totals = check_counts([g[C.OBS] for g in segs], [g[C.TERMINATED] for g in segs], L)
    assert totals["transitions"] == len(segs) * T * ENVS * AGENTS and totals["envs"] == SPLITS * ENVS
    for seg in segs:
        obs, acted = seg[C.OBS], seg[C.OBS][:-1]
        assert (seg[C.ACTION] == obs[..., 2] % 2).all()
        assert (seg[C.VALUE] == 100 * obs[..., 0] + 10 * obs[..., 3] + obs[..., 2]).all()
        assert (seg[C.REWARD][:-1] == 1.0).all() and not seg[C.TRUNCATED][:-1].any()
        assert (seg[C.TERMINATED][:-1] == (acted[..., 2] == L - 1)).all()
        versions = seg[C.POLICY_VERSION]
        assert (versions == versions[0] + np.arange(T + 1)[:, None]).all(), "one reply per row, in order"
    for chain in chains.values():
        for before, after in zip(chain, chain[1:]):
            for column in SLOT_COLUMNS:
                assert np.array_equal(before[column][T], after[column][0]), column
    report = kernel.report()
    episodes = SPLITS * ENVS * AGENTS * (polls // L)  # one return per agent row
    assert report["env_steps"] == polls * SPLITS * ENVS  # env steps, not rows
    assert report["episode_returns"] == [float(L)] * episodes and report["episode_lengths"] == [L] * episodes
    assert kernel.report()["env_steps"] == 0 and kernel.report()["episode_returns"] == []


def test_actor_back_pressure_stops_after_two_segments_per_split_and_resumes():
    """With no release the actor sends SLOTS segments per split, then idles without touching the held
    slots; a released slot lets only its split go on, from the bootstrap row it stopped at."""
    kernel, consumer = make_actor()
    kernel.start()
    held = []
    for _ in range(30):
        kernel.poll()
        held += take(consumer, release=False)
    assert sorted((r.split, r.slot) for r, _ in held) == [(s, k) for s in range(SPLITS) for k in range(SLOTS)]
    assert kernel.blocked == set(range(SPLITS))
    assert kernel.report()["env_steps"] == SLOTS * T * SPLITS * ENVS
    assert not any(kernel.poll() for _ in range(5))
    assert kernel.report()["env_steps"] == 0
    for ref, copy in held:
        assert all(np.array_equal(consumer.segment(ref)[k], v, equal_nan=True) for k, v in copy.items())

    first = next(ref for ref, _ in held if ref.split == 0)
    consumer.release(first)
    more = []
    for _ in range(10):
        kernel.poll()
        more += take(consumer, release=False)
    assert [(ref.split, ref.slot) for ref, _ in more] == [(0, first.slot)]
    assert kernel.blocked == set(range(SPLITS))
    last_held = [seg for ref, seg in held if ref.split == 0][-1]
    assert np.array_equal(more[0][1][C.OBS][0], last_held[C.OBS][T])
    segs = [seg for _, seg in held + more]
    check_counts([g[C.OBS] for g in segs], [g[C.TERMINATED] for g in segs], L)


# ------------------------------------------------------------------------------ policy worker


def test_actor_counts_an_episode_once_when_all_agents_of_the_env_are_done():
    """An agent done early repeats its flag until the env ends: still one episode per agent."""
    kernel, _ = make_actor()
    rows = ENVS * AGENTS
    reward = np.ones(rows, np.float32)
    early = np.zeros(rows, bool)
    early[0] = True  # env 0, agent 0 finished early; its flag repeats on every later step
    for _ in range(3):
        kernel._count_episodes(0, reward, early)
    assert kernel.finished_returns == []
    everyone = early.copy()
    everyone[:AGENTS] = True  # now every agent of env 0 is done
    kernel._count_episodes(0, reward, everyone)
    assert kernel.finished_returns == [4.0] * AGENTS and kernel.finished_lengths == [4] * AGENTS
    assert kernel.tallies[0].running_return[:AGENTS].tolist() == [0.0] * AGENTS
    assert kernel.tallies[0].running_return[AGENTS:].tolist() == [4.0] * (rows - AGENTS)


def test_policy_worker_waits_for_params_then_answers_every_request_in_one_batch():
    """Requests from 2 actors wait while the worker has no parameters (version -1); once a
    version is published one poll answers all 4 in one batch, with that version's outputs."""
    transport, graph = InlineTransport(), counting_graph()
    policy, trained = (make_policy(graph.config, graph.observation_space, graph.action_space) for _ in "ab")
    service, slots = ParamServiceKernel(transport, tensor_bytes(policy)), {}
    rng = np.random.default_rng(0)
    for a in (0, 1):
        arrays = transport.arrays(actor_block(a), graph.actor_layout())
        poison(arrays)
        for s in range(SPLITS):
            slots[(a, s)] = sub_arrays(arrays, f"infer.{s}.")
            slots[(a, s)][C.OBS][:] = rng.normal(size=slots[(a, s)][C.OBS].shape)
    acting = Acting(policy, ParamSubscriber(transport, policy))
    kernel = PolicyWorkerKernel(acting, InferenceServer(transport, 0, [0, 1]), slots)
    clients = [InferenceClient(transport, a, 0) for a in (0, 1)]
    kernel.start()
    for a, s in slots:
        clients[a].request(s)

    assert not kernel.poll() and not kernel.poll()
    assert [c.ready() for c in clients] == [[], []]
    assert all(slot["version"][0] == -1 and np.isnan(slot[C.VALUE]).all() for slot in slots.values())
    service.poll()  # the worker's WANT: nothing to send yet
    ParamPublisher(transport).publish(4, trained)
    service.poll()
    assert kernel.poll()
    assert kernel.report()["batches"] == 1
    assert [sorted(c.ready()) for c in clients] == [[0, 1], [0, 1]]
    for slot in slots.values():  # outputs of the published weights (actions are sampled)
        expected = trained.analyze(torch.tensor(slot[C.OBS]), torch.tensor(slot[C.ACTION]))
        assert slot["version"][0] == 4 and set(slot[C.ACTION].tolist()) <= {0, 1}
        for name in (C.LOG_PROB, C.VALUE):
            np.testing.assert_allclose(slot[name], expected[name].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert not kernel.poll() and kernel.report()["batches"] == 0
    ParamPublisher(transport).publish(6, policy)  # later batches use the newest version
    service.poll()
    clients[1].request(0, key=1)  # a split's requests are counted by their key
    assert kernel.poll() and slots[(1, 0)]["version"][0] == 6 and slots[(0, 0)]["version"][0] == 4


# ------------------------------------------------------------------------------ trainer

ROWS = 3
FIELDS = {
    C.OBS: FieldSpec((2,), np.float32), C.ACTION: FieldSpec((), np.int64),
    C.REWARD: FieldSpec((), np.float32), C.TERMINATED: FieldSpec((), np.bool_),
    C.TRUNCATED: FieldSpec((), np.bool_), C.POLICY_VERSION: FieldSpec((), np.int64),
}  # fmt: skip


class RecordingAlgorithm(Algorithm):
    """Keeps a copy of each batch and its env_steps; nudges the weights so versions differ."""

    def __init__(self, policy):
        super().__init__(policy, AlgorithmConfig(), 10**6)
        self.batches = []

    def step(self, batch, env_steps):
        self.batches.append(({k: v.numpy().copy() for k, v in batch.items()}, env_steps))
        with torch.no_grad():
            for p in self.policy.parameters():
                p.add_(1.0)
        return {"loss/fake": float(len(self.batches))}


@pytest.fixture
def trainer(tmp_path):
    """A TrainerKernel (batches of 2 segments, max lag 1) fed by 2 hand-driven producers."""
    transport, policy = InlineTransport(), torch.nn.Linear(2, 2)
    segs = {(a, 0, k): {n: np.zeros((T + 1, ROWS, *f.shape), f.dtype) for n, f in FIELDS.items()}
            for a in (0, 1) for k in (0, 1)}  # fmt: skip
    producers = [SampleProducer(transport, a, {(0, k): segs[(a, 0, k)] for k in (0, 1)}) for a in (0, 1)]
    published = transport.receiver(SERVICE_IN)
    kernel = TrainerKernel(
        policy, RecordingAlgorithm(policy), SampleConsumer(transport, segs), ParamPublisher(transport),
        FIELDS, T, batch_segments=2, rows_per_segment=ROWS, num_agents=1,
        settings=LearnerSettings(run_dir=tmp_path, checkpoint_interval_s=3600, max_policy_lag=1),
    )  # fmt: skip
    kernel.start()
    assert [m.header for m in published.recv_all()] == [(PUBLISH, 0, 0)]
    return kernel, producers, published


def send(producer, tag, versions):
    """Fill a free slot with values unique to `tag`, acted by `versions` (per row t), and send it."""
    slot = producer.acquire(0)
    seg, t = producer.slots[(0, slot)], np.arange((T + 1) * ROWS).reshape(T + 1, ROWS)
    seg[C.OBS][:] = np.stack([t, -t], -1) + 1000 * tag
    seg[C.ACTION][:], seg[C.REWARD][:] = t + 100 * tag, t / 2 + tag
    seg[C.TERMINATED][:], seg[C.TRUNCATED][:] = t % 2 == 1, t % 3 == 0
    seg[C.POLICY_VERSION][:] = np.asarray(versions).reshape(-1, 1)
    producer.send(0, slot)
    return {k: v.copy() for k, v in seg.items()}


def test_learner_settings_are_the_configs(tmp_path):
    """One LearnerSettings from the config, for the trainer, the replay trainer and the pod alike."""
    from srl.config.load import load_config

    c = load_config("cartpole-ppo", [f"run.run_dir={tmp_path}", "run.run_id=abc", "run.checkpoint_interval_s=7",
                                     "launch.max_nonfinite_updates=3", "stop.max_updates=9", "dataflow.max_policy_lag=4",
                                     "debug.record_param_digests=true"])
    assert LearnerSettings.of(c) == LearnerSettings(
        run_dir=tmp_path, checkpoint_interval_s=7.0, resume=False, run_id="abc", max_nonfinite_updates=3,
        max_updates=9, max_policy_lag=4, record_digests=True)


def test_trainer_copies_segments_into_batch_columns_publishes_and_checkpoints(trainer):
    """Segment i fills batch columns [i*ROWS, (i+1)*ROWS) of every field; each update publishes
    version + 1 with the updated weights; slots are released at once; finish() checkpoints."""
    kernel, producers, published = trainer
    a, b = send(producers[0], 1, [0] * (T + 1)), send(producers[1], 2, [0] * (T + 1))
    assert kernel.poll()
    ((batch, env_steps),) = kernel.algorithm.batches
    assert env_steps == T * 2 * ROWS
    for name in FIELDS:
        assert np.array_equal(batch[name], np.concatenate([a[name], b[name]], axis=1)), name
    (message,) = published.recv_all()
    assert message.header == (PUBLISH, 1, 0) and kernel.version == 1
    copy = torch.nn.Linear(2, 2)
    load_frames(copy, message.frames)
    assert torch.equal(copy.weight, kernel.policy.weight) and torch.equal(copy.bias, kernel.policy.bias)
    assert [sorted([p.acquire(0), p.acquire(0)]) for p in producers] == [[0, 1], [0, 1]]
    final = kernel.finish()  # a checkpoint of version 1 and the hash of its weights
    saved = checkpoint.load_latest(kernel.run_dir)
    assert saved["version"] == final["policy_version"] == 1 and saved["env_steps"] == T * 2 * ROWS
    copy.load_state_dict(saved["policy"])
    assert final["params_sha256"] == checkpoint.params_sha256(copy) == checkpoint.params_sha256(kernel.policy)


def test_trainer_drops_stale_segments_and_reports_the_lag(trainer):
    """At version 2 with max lag 1: a segment acted by version 0 is dropped (and released),
    the others fill the batch; policy_lag_mean is the mean over their acted rows."""
    kernel, producers, published = trainer
    for _ in range(2):
        send(producers[0], 0, [kernel.version] * (T + 1)), send(producers[1], 0, [kernel.version] * (T + 1))
        kernel.poll()
    assert kernel.version == 2 and kernel.report()["segments_dropped"] == 0
    send(producers[0], 7, [0] * (T + 1))
    b, c = send(producers[1], 8, [1, 2, 1, 2, 2]), send(producers[0], 9, [2] * (T + 1))
    kernel.poll()
    kernel.poll()
    batch, _ = kernel.algorithm.batches[-1]
    assert np.array_equal(batch[C.OBS], np.concatenate([b[C.OBS], c[C.OBS]], axis=1))
    report = kernel.report()
    assert report["segments_dropped"] == 1 and report["updates"] == 1 and report["policy_version"] == 3
    assert report["policy_lag_mean"] == pytest.approx((1 + 0 + 1 + 0) * ROWS / (2 * T * ROWS))
    assert report["trained_env_steps"] == 3 * T * 2 * ROWS and report["loss/fake"] == 3.0
    assert [m.header for m in published.recv_all()] == [(PUBLISH, 1, 0), (PUBLISH, 2, 0), (PUBLISH, 3, 0)]
    assert producers[0].acquire(0) is not None and producers[0].acquire(0) is not None


# ------------------------------------------------------------------------------ parameter service


def test_param_service_keeps_the_newest_version_and_answers_want():
    """Out-of-order publishes never replace a newer version; WANT re-sends the current one; a
    publish whose frames are not the policy's tensors is dropped and counted, never served."""
    transport = InlineTransport()
    service, out = ParamServiceKernel(transport, [4]), transport.subscriber(SERVICE_OUT)
    tx = transport.sender(SERVICE_IN)

    def sent():
        service.poll()
        return [(m.header, m.frames) for m in out.recv_all()]

    tx.send((WANT, 0))
    assert sent() == [] and service.version == -1
    tx.send((PUBLISH, 3, 0), [b"3333"])
    assert sent() == [((3, 0), [b"3333"])]
    tx.send((PUBLISH, 1, 0), [b"1111"])
    assert sent() == [] and service.version == 3
    tx.send((PUBLISH, 5, 0), [b"5555"])
    tx.send((PUBLISH, 4, 0), [b"4444"])
    assert sent() == [((5, 0), [b"5555"])]
    tx.send((WANT, 0))
    assert sent() == [((5, 0), [b"5555"])]
    assert service.report() == {"params_version": 5, "publishes": 3}
    tx.send((PUBLISH, 2, 1), [b"2222"])  # a restarted trainer: older version, newer generation
    tx.send((PUBLISH, 6, 0), [b"dead"])  # the dead trainer's last words
    assert sent() == [((2, 1), [b"2222"])] and service.version == 2
    assert transport.take_rejected() == {}
    tx.send((PUBLISH, 10**9, 9), [b"a larger tensor"])  # served, it would block every later version
    tx.send((PUBLISH, 7), [b"7777"])  # no generation
    assert sent() == [] and service.version == 2
    assert transport.take_rejected() == {SERVICE_IN: 2}


# ------------------------------------------------------------------------------ run monitor


def test_a_version_held_back_on_either_hop_is_asked_for_again(params_clock):
    """A conflating pipe may hold a message back until the next write (srl.streams.params); lock
    step makes no next version until its actors have this one. Held back between service and
    subscriber: the subscriber asks (WANT 1) after WANT_RETRY_S, the service answers once it holds
    version 1. Held back between trainer and service: the trainer, hearing nothing, sends it again
    after REPUBLISH_S."""
    transport, graph = InlineTransport(), counting_graph()
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    service, publisher = ParamServiceKernel(transport, tensor_bytes(policy)), ParamPublisher(transport)
    acting = Acting(policy, ParamSubscriber(transport, policy), sampling_seed=1)
    start, first, second = Request(0, 0), Request(0, 0, min_version=1, key=1), Request(0, 0, min_version=2, key=2)
    publisher.publish(0, policy)
    service.poll()
    assert acting.actionable([start]) == [start]
    publisher.publish(1, policy)
    service.poll()
    acting.params.receivers[0].recv_all()  # version 1 held back on the way to the subscriber
    assert acting.actionable([first]) == []
    params_clock.now += WANT_RETRY_S * 0.9
    service.poll()
    assert acting.actionable([first]) == [], "most versions come within milliseconds: no WANT yet"
    params_clock.now += WANT_RETRY_S * 0.1
    service.poll()
    assert acting.actionable([first]) == []  # WANT 1 sent
    service.poll()
    assert acting.actionable([first]) == [first] and acting.params.version == 1

    publisher.publish(2, policy)
    service.receivers[0].recv_all()  # held back on the way to the service
    for _ in range(3):  # WANT 2 every WANT_RETRY_S: the service holds 1, it does not answer
        assert acting.actionable([second]) == []
        params_clock.now += WANT_RETRY_S
        service.poll()
    assert acting.actionable([second]) == [] and service.version == 1
    publisher.publish_again_if_unheard(2, policy, heard=True)  # a segment came: nothing is lost
    params_clock.now += REPUBLISH_S - 3 * WANT_RETRY_S
    publisher.publish_again_if_unheard(2, policy, heard=False)
    service.poll()
    assert service.version == 1
    params_clock.now += 3 * WANT_RETRY_S
    publisher.publish_again_if_unheard(2, policy, heard=False)
    service.poll()
    assert acting.actionable([second]) == [second] and acting.params.version == 2


def test_the_trainer_publishes_its_version_again_while_no_segment_comes(params_clock, trainer):
    kernel, producers, published = trainer  # version 0 published at the clock's now
    params_clock.now += REPUBLISH_S / 2
    assert not kernel.poll() and published.recv_all() == []
    params_clock.now += REPUBLISH_S / 2
    assert not kernel.poll() and [m.header for m in published.recv_all()] == [(PUBLISH, 0, 0)]
    params_clock.now += REPUBLISH_S / 2
    send(producers[0], 1, [0] * (T + 1))
    assert kernel.poll() and published.recv_all() == [], "half of the batch came"
    params_clock.now += REPUBLISH_S * 0.9
    assert not kernel.poll() and published.recv_all() == []



def test_a_subscriber_that_missed_the_versions_gets_them_again_when_every_segment_is_dropped(params_clock, tmp_path):
    """A subscriber that missed the trainer's last versions (a restarted parameter service's sends
    before it reconnected; a conflating pipe) acts with weights the trainer drops, lag past
    max_policy_lag: no update, so no next version to catch up with. The faults soak stalled so for
    good after its last service restart (benchmarks/faults.py: every segment dropped, version
    181 for 230 s). Segments that all drop count as unheard: the trainer publishes its version
    again after REPUBLISH_S and the service sends it on again, though it holds that version."""
    transport, policy, acting = InlineTransport(), torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    segs = {(a, 0, k): {n: np.zeros((T + 1, ROWS, *f.shape), f.dtype) for n, f in FIELDS.items()}
            for a in (0, 1) for k in (0, 1)}  # fmt: skip
    producers = [SampleProducer(transport, a, {(0, k): segs[(a, 0, k)] for k in (0, 1)}) for a in (0, 1)]
    service = ParamServiceKernel(transport, tensor_bytes(policy))
    subscriber = ParamSubscriber(transport, acting)
    kernel = TrainerKernel(
        policy, RecordingAlgorithm(policy), SampleConsumer(transport, segs), ParamPublisher(transport),
        FIELDS, T, batch_segments=2, rows_per_segment=ROWS, num_agents=1,
        settings=LearnerSettings(run_dir=tmp_path, checkpoint_interval_s=3600, max_policy_lag=1),
    )  # fmt: skip

    def act_and_train(version=None):  # acted by the subscriber's version, or the one given
        for producer in producers:
            send(producer, 0, [subscriber.version if version is None else version] * (T + 1))
        kernel.poll()
        service.poll()

    kernel.start()
    service.poll()
    assert subscriber.poll(acting) and subscriber.version == 0
    for version in range(3):
        act_and_train(version)  # acted by a policy worker that had them
        subscriber.receivers[0].recv_all()  # versions 1 to 3: missed by this one
    assert kernel.version == 3 and subscriber.version == 0
    for _ in range(3):  # acted by version 0, lag 3: dropped, and within REPUBLISH_S nothing is sent again
        params_clock.now += REPUBLISH_S / 4
        act_and_train()
        assert not subscriber.poll(acting)
    assert kernel.version == 3 and kernel.report()["segments_dropped"] == 6
    params_clock.now += REPUBLISH_S / 4
    act_and_train()
    assert subscriber.poll(acting) and subscriber.version == 3
    assert torch.equal(acting.weight, policy.weight) and torch.equal(acting.bias, policy.bias)
    act_and_train()  # acted by version 3: trained on
    assert kernel.version == 4 and kernel.report()["segments_dropped"] == 2

@pytest.fixture
def clock(monkeypatch):
    """A hand-driven clock for srl.launch.monitor: set `clock.now`."""
    fake = SimpleNamespace(now=1000.0)
    fake.monotonic, fake.time = (lambda: fake.now), (lambda: 1.7e9 + fake.now)
    monkeypatch.setattr(monitor_module, "time", fake)
    return fake


def monitor(**fields):
    return RunMonitor(build_config({"experiment": "m", "total_env_steps": 1000, **fields}))


def actor(steps, returns=()):
    return {"env_steps": steps, "episode_returns": list(returns), "episode_lengths": [10] * len(returns)}


def test_monitor_stops_at_total_env_steps_or_time_limit(clock):
    m = monitor(time_limit_s=10)
    m.on_report(Role.ACTOR, 0, actor(999))
    clock.now += 9.9
    assert m.stop() is None
    clock.now += 0.2
    assert m.stop().reason == "time_limit_s 10.0 reached"
    m.on_report(Role.ACTOR, 1, actor(1))
    assert m.stop().reason == "total_env_steps 1000 reached"


def test_monitor_target_return_needs_100_episodes(clock):
    """Reached only with >= 100 episodes whose window mean is >= the target."""
    m = monitor(target_return=50.0, total_env_steps=10**9)
    m.on_report(Role.ACTOR, 0, actor(10, [60.0] * 99))
    assert m.stop() is None
    clock.now += 5
    m.on_report(Role.ACTOR, 0, actor(10, [60.0]))
    assert m.stop().reason.startswith("target_return 50.0 reached") and m.target_reached_s == pytest.approx(5)
    low = monitor(target_return=50.0, total_env_steps=10**9)
    low.on_report(Role.ACTOR, 0, actor(10, [49.0] * 150))
    assert low.stop() is None


def test_monitor_time_limit_counts_the_run_the_launch_or_the_stepping(clock):
    """stop.time_limit_counts: run (the default) adds the earlier launches' seconds; launch counts from
    the workers' start; stepping from the first env steps (slow env construction not counted)."""
    from srl.launch.launches import LaunchStart, RunCounts

    earlier = LaunchStart(2, 0.0, RunCounts(env_steps=900, updates=4, episodes=3, time_s=8.0), resumed_env_steps=800,
                          env_steps_redone=100)
    ms = {counts: RunMonitor(build_config({"experiment": "m", "stop": {
        "time_limit_s": 10, "time_limit_counts": counts, "total_env_steps": 10**6}}), 800) for counts in ("run", "launch", "stepping")}
    for m in ms.values():
        m.continue_run(earlier)
    clock.now += 3
    for m in ms.values():
        m.on_report(Role.ACTOR, 0, actor(0))  # built, nothing stepped yet
    assert ms["run"].stop().reason == "time_limit_s 10.0 reached"  # 8 + 3
    assert ms["launch"].stop() is None and ms["stepping"].time_limit_elapsed_s() is None
    for m in ms.values():
        m.on_report(Role.ACTOR, 0, actor(50, [1.0]))
    clock.now += 7.5
    assert ms["launch"].stop().reason == "time_limit_s 10.0 reached (stop.time_limit_counts=launch)"
    assert ms["stepping"].stop() is None
    clock.now += 2.5
    assert ms["stepping"].stop().reason == "time_limit_s 10.0 reached (stop.time_limit_counts=stepping)"
    # the run's counters go on from the earlier launches'; the policy's env steps (800 + 50) do not hold the re-done
    row = ms["run"].metrics()
    assert (row["env_steps"], row["episodes"], row["updates"], row["env_steps_redone"]) == (950, 4, 4, 100)
    assert ms["run"].env_steps == 850 and ms["run"].run_counts().time_s == pytest.approx(21.0)


def test_monitor_metrics(clock):
    """Rates over the time since the last metrics(); trainer fields from the last report with updates."""
    m = monitor()
    trainer_report = {"policy_version": 7, "updates": 2, "segments_dropped": 1, "policy_lag_mean": 0.5,
                      "losses/pi": 0.25, "train_time_s": 0.1, "trained_env_steps": 480}  # fmt: skip
    m.on_report(Role.ACTOR, 0, actor(300, [4.0, 6.0]))
    m.on_report(Role.ACTOR, 1, actor(200))
    m.on_report(Role.TRAINER, 0, trainer_report)
    m.on_report(Role.TRAINER, 0, {**trainer_report, "updates": 0, "segments_dropped": 2, "policy_version": 0})
    clock.now += 2
    assert m.metrics() == {
        "env_steps": 500, "env_steps_per_s": 250.0, "episode_return_mean": 5.0, "episode_length_mean": 10.0,
        "episodes": 2, "policy_version": 7, "policy_lag_mean": 0.5, "updates": 2, "segments_dropped": 3,
        "segments_lost": 0, "env_steps_lost": 0, "updates_lost": 0, "restarts": 0, "losses/pi": 0.25,
        "trained_env_steps": 480, "nonfinite_episodes_skipped": 0, "nonfinite_updates_skipped": 0,
        "rejected_messages": 0, "dropped_messages": 0, "env_steps_redone": 0, "updates_redone": 0,
    }  # fmt: skip
    clock.now += 1
    assert m.metrics()["env_steps_per_s"] == 0.0
    assert m.busy_s == {"trainer:0": pytest.approx(0.2)}


def test_monitor_run_rate_is_over_the_whole_launch(clock):
    """The summary's rate: this launch's env steps (not a resumed run's earlier ones) over the time
    since the monitor was made, however close the last metrics() was."""
    m = RunMonitor(build_config({"experiment": "m", "total_env_steps": 10**6}), start_env_steps=5000)
    m.on_report(Role.ACTOR, 0, actor(300))
    clock.now += 2
    m.metrics()
    m.on_report(Role.ACTOR, 0, actor(700))
    clock.now += 0.5
    assert m.metrics()["env_steps_per_s"] == 1400.0  # the last half second only
    assert m.run_rate() == 400.0  # 1000 steps in 2.5 s
    assert RunMonitor(build_config({"experiment": "m"})).run_rate() is None  # no time has passed


def test_monitor_silent_workers_after_the_heartbeat_timeout(clock):
    """A worker is silent once its last report (or the start, if none) is older than the timeout."""
    m = monitor(heartbeat_timeout_s=30)
    workers = ["actor:0", "trainer:0"]
    m.on_report(Role.ACTOR, 0, actor(1))
    clock.now += 30
    assert m.silent_workers(workers) == []
    clock.now += 1
    assert m.silent_workers(workers) == workers
    m.on_report(Role.ACTOR, 0, actor(1))
    assert m.silent_workers(workers) == ["trainer:0"]
