"""Recurrent policies on the dataflow: state kept per env by the acting side, reset at episode
starts, stored with each segment row; the trainer's replay from the stored state reproduces the
acting log-probabilities; burn-in steps carry no loss. Kernels driven by hand, no processes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from srl.algos.ppo import PPO, PPOConfig
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.config.load import load_config
from srl.data import columns as C
from srl.envs import SerialVectorEnv, make_vector_env
from srl.graph import actor_block, build_graph, make_policy, sub_arrays
from srl.streams.inline import InlineTransport
from srl.streams.layout import poison
from srl.streams.params import ParamPublisher, ParamSubscriber, tensor_bytes
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.testing import CountingEnv
from srl.workers.actor import ActorKernel
from srl.workers.hidden import HiddenStates
from srl.workers.params import ParamServiceKernel
from srl.workers.policy import Acting, LocalInferenceClient

L, T, ENVS = 3, 5, 4  # counting episode length (not a divisor of T: resets fall mid-segment), steps, envs


def recurrent_config(cell="lstm", **extra):
    return build_config({
        "experiment": "recurrent", "env": "counting", "env_kwargs": {"episode_length": L},
        "envs_per_actor": ENVS, "ring_splits": 1, "sample_length": T, "segment_slots": 2,
        "policy": "recurrent-actor-critic", "policy_kwargs": {"cell": cell, "hidden": 8}, **extra,
    })  # fmt: skip


def act_segments(cell: str, polls: int = 4 * T + 1):
    """An actor with inline inference over counting envs; returns (policy, the segments it sent)."""
    transport, graph = InlineTransport(), build_graph(recurrent_config(cell))
    torch.manual_seed(0)
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    arrays = transport.arrays(actor_block(0), graph.actor_layout())
    poison(arrays)  # an unwritten row shows up as NaN / -1
    infer = [sub_arrays(arrays, "infer.0.")]
    segments = {(0, k): sub_arrays(arrays, f"sample.0.{k}.") for k in range(2)}
    service = ParamServiceKernel(transport, tensor_bytes(policy))
    acting_policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    acting = Acting(acting_policy, ParamSubscriber(transport, acting_policy))
    envs = [SerialVectorEnv([CountingEnv(e, L) for e in range(ENVS)])]
    actor = ActorKernel(envs, LocalInferenceClient(acting, infer, 0), SampleProducer(transport, 0, segments), infer, T, [0])
    consumer = SampleConsumer(transport, {(0, 0, k): seg for (_, k), seg in segments.items()})
    ParamPublisher(transport).publish(0, policy)
    service.poll()
    actor.start()
    got = []
    for _ in range(polls):
        service.poll()
        actor.poll()
        for ref in consumer.poll(limit=10):
            got.append({k: v.copy() for k, v in consumer.segment(ref).items()})
            consumer.release(ref)
    return policy, got


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_hidden_state_is_zero_exactly_at_episode_starts_and_chains_across_segments(cell):
    _, segments = act_segments(cell)
    assert len(segments) == 4
    for seg in segments:
        starts = seg[C.OBS][..., 2] == 0  # the counting env's step in its episode
        assert np.array_equal(seg[C.FIRST], starts)
        norms = np.abs(seg[C.HIDDEN]).sum(-1)
        assert (norms[starts] == 0).all() and (norms[~starts] > 0).all()
    for before, after in itertools.pairwise(segments):  # row T of one is row 0 of the next
        for name in (C.HIDDEN, C.FIRST, C.LOG_PROB):
            assert np.array_equal(before[name][T], after[name][0]), name


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_replay_from_the_stored_state_reproduces_the_acting_log_probs(cell):
    """The trainer's view: each segment re-run from hidden[0] with resets at `first`."""
    policy, segments = act_segments(cell)
    for seg in segments:
        s = {k: torch.from_numpy(v[:T]) for k, v in seg.items()}
        with torch.no_grad():
            out = policy.analyze_sequence(s[C.OBS], s[C.ACTION], s[C.HIDDEN][0], s[C.FIRST])
        # equal to float32 rounding, not bit for bit: the heads see [T*B] rows here and [B] when
        # acting, and a BLAS may block the two products differently (on an Intel Xeon the values
        # differed in the last bit); a wrong state or reset would be off by far more
        for name in (C.LOG_PROB, C.VALUE):
            torch.testing.assert_close(out[name], s[name], rtol=0, atol=1e-6, msg=name)


def test_hidden_states_keep_one_state_per_group():
    store = HiddenStates(state_size=2)
    assert store.gather([(0, 0), (1, 0)], [2, 1]).tolist() == [[0, 0]] * 3
    store.scatter([(0, 0), (1, 0)], [2, 1], np.arange(6, dtype=np.float32).reshape(3, 2))
    assert store.gather([(1, 0)], [1]).tolist() == [[4, 5]]
    assert store.gather([(0, 0)], [2]).tolist() == [[0, 1], [2, 3]]


def ppo_after_one_step(burn_in: int, scramble_steps: int) -> list[torch.Tensor]:
    """Parameters after one deterministic PPO step on a fixed batch, with the stored log-probs
    and values of the first `scramble_steps` steps replaced by garbage."""
    torch.manual_seed(0)
    _, segments = act_segments("lstm")
    batch = {k: torch.from_numpy(np.concatenate([s[k] for s in segments[:2]], axis=1)) for k in segments[0]}
    batch[C.LOG_PROB][:scramble_steps] = -5.0
    batch[C.VALUE][:scramble_steps] = 37.0
    graph = build_graph(recurrent_config())
    torch.manual_seed(1)
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    config = PPOConfig(epochs=1, num_minibatches=1, burn_in=burn_in, anneal_lr=False, lr=1e-2)
    PPO(policy, config, total_env_steps=1000).step(batch, env_steps=0)
    return [p.detach().clone() for p in policy.parameters()]


def test_burn_in_steps_carry_no_loss():
    clean, scrambled = ppo_after_one_step(2, 0), ppo_after_one_step(2, 2)
    assert all(torch.equal(a, b) for a, b in zip(clean, scrambled))
    without = ppo_after_one_step(0, 0), ppo_after_one_step(0, 2)  # the check can fail
    assert not all(torch.equal(a, b) for a, b in zip(*without))


def test_config_refuses_burn_in_that_leaves_no_loss_steps():
    with pytest.raises(ConfigError, match=r"algo\.burn_in.*sample_length \(5\)"):
        recurrent_config(algo={"burn_in": T})
    with pytest.raises(ConfigError, match="algo.burn_in.*needs a recurrent policy"):
        build_graph(build_config({"experiment": "x", "env": "counting", "sample_length": T, "algo": {"burn_in": 2}}))
    with pytest.raises(ConfigError, match="policy_kwargs.*cell.*'lstm', 'gru'.*'rnn'"):
        build_graph(recurrent_config(cell="rnn"))
    with pytest.raises(ConfigError, match="num_minibatches.*segment rows"):
        build_graph(recurrent_config(algo={"num_minibatches": ENVS + 1}))
    with pytest.raises(ConfigError, match="field 'algorithm'.*cannot train the recurrent"):
        build_graph(recurrent_config(algorithm="appo"))


def test_cartpole_lstm_experiment_masks_the_velocities():
    graph = build_graph(load_config("cartpole-lstm-ppo"))
    assert graph.observation_space.shape == (2,) and C.HIDDEN in graph.segment_fields()
    env = make_vector_env("CartPoleNoVel-v1", {}, 1)
    try:
        assert env.reset(seed=0).shape == (1, 2)
    finally:
        env.close()


# ------------------------------------------------------------------------------ R2D2


def test_segment_rows_become_sequences_with_their_start_state():
    from srl.data.sequences import segment_sequences

    _, segments = act_segments("gru")
    seg = segments[1]
    seqs = segment_sequences(seg)
    assert seqs[C.OBS].shape == (ENVS, T + 1, 4) and seqs[C.HIDDEN].shape == (ENVS, 8)
    assert np.array_equal(seqs[C.OBS][2], seg[C.OBS][:, 2]) and np.array_equal(seqs[C.HIDDEN], seg[C.HIDDEN][0])
    assert np.array_equal(seqs[C.FIRST].T, seg[C.FIRST])


def r2d2_after_one_step(burn_in: int, scramble_steps: int):
    """(parameters, priorities) after one R2D2 step on a fixed sequence batch whose rewards and
    actions in the first `scramble_steps` steps are replaced by garbage."""
    from srl.algos.r2d2 import R2D2, R2D2Config
    from srl.data.sequences import segment_sequences

    _, segments = act_segments("lstm")
    seqs = [segment_sequences(s) for s in segments[:2]]
    batch = {k: torch.from_numpy(np.concatenate([s[k] for s in seqs])) for k in seqs[0]}
    rows = len(batch[C.HIDDEN])
    batch[C.REWARD][:, :scramble_steps] = 9.0
    batch[C.ACTION][:, :scramble_steps] = 1 - batch[C.ACTION][:, :scramble_steps]
    batch[C.WEIGHT], batch[C.PRIORITY] = torch.ones(rows), torch.zeros(rows)
    graph = build_graph(recurrent_config(policy="recurrent-q", algorithm="r2d2", replay={"warmup": 1, "batch_size": 8},
                                         epsilon=0.1))  # fmt: skip
    torch.manual_seed(1)
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    R2D2(policy, R2D2Config(burn_in=burn_in, n_step=2), 1000).step(batch, env_steps=0)
    return [p.detach().clone() for p in policy.parameters()], batch[C.PRIORITY].clone()


def test_r2d2_burn_in_steps_carry_no_loss():
    (clean, p1), (scrambled, p2) = r2d2_after_one_step(2, 0), r2d2_after_one_step(2, 2)
    assert all(torch.equal(a, b) for a, b in zip(clean, scrambled)) and torch.equal(p1, p2)
    assert (p1 > 0).all()
    without = r2d2_after_one_step(0, 0)[0], r2d2_after_one_step(0, 2)[0]  # the check can fail
    assert not all(torch.equal(a, b) for a, b in zip(*without))


def test_cartpole_r2d2_runs_end_to_end_on_the_buffer_worker(run_dir):
    import json

    from srl.launch.run import run_experiment

    config = load_config("cartpole-r2d2", ["launch.launcher=inline", "stop.total_env_steps=3000", f"run.run_dir={run_dir}",
                                           "monitor.display=off", "replay.warmup=16"])  # fmt: skip
    assert run_experiment(config) == 0
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["policy_version"] > 0 and np.isfinite(lines[-1]["losses/td_loss"])


def test_first_flags_travel_with_requests_and_the_state_with_replies():
    """On tcp, a request carries what the actor writes (obs, first), a reply what the policy writes."""
    from srl.streams.inference import reply_fields, request_fields

    slot = build_graph(recurrent_config()).slot_fields()
    assert request_fields(slot) == [C.OBS, C.FIRST]
    assert set(reply_fields(slot)) == {C.ACTION, C.LOG_PROB, C.VALUE, C.HIDDEN}
    plain = build_graph(build_config({"experiment": "x", "env": "counting"})).slot_fields()
    assert request_fields(plain) == [C.OBS] and C.FIRST not in plain
