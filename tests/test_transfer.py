"""Host <-> device staging (srl.transfer): batches concatenated into reusable host buffers, one
asynchronous copy per leaf in and per output out, one wait per batch. On the CPU the staging is
taken through the same copies without pinning (`pin=False`), its waits counted, and its outputs
held against the zero-copy CPU path's; on a GPU (tests marked gpu) acting, the trainer's batch
and the published weights are held against the CPU's."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl import checkpoint, transfer
from srl.algos.colored_noise import ColoredActionNoise
from srl.checks import build_config
from srl.data import columns as C
from srl.dataflow import WorkerSpec
from srl.graph import actor_block, build_graph, make_policy, sub_arrays
from srl.load import load_config
from srl.models.multi_input import MultiInputActorCritic
from srl.models.squashed_gaussian import SquashedGaussianMLP
from srl.spaces import column, map_obs, obs_buffers, obs_of, put_row
from srl.streams.control import Role
from srl.streams.inference import Request
from srl.streams.inline import InlineTransport
from srl.streams.params import SERVICE_IN, FixedParams, ParamPublisher, state_frames
from srl.workers.build import make_kernel
from srl.workers.build_replay import make_replay_trainer
from srl.workers.evaluator import Player
from srl.workers.policy import Acting

CPU = torch.device("cpu")
SPLITS, ENVS = 3, 4


class CountingStaging(transfer.Staging):
    """The staging a GPU gets, taken on the CPU (no pinning), counting its waits."""

    def __init__(self) -> None:
        super().__init__(CPU, pin=False)
        self.waits = 0

    def wait(self) -> None:
        self.waits += 1
        super().wait()


def _rows(n: int, seed: int, dtype=np.float32) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 2)).astype(dtype)


# ------------------------------------------------------------------------------ staging


def test_there_is_no_staging_on_the_cpu():
    assert transfer.for_device(CPU) is None  # callers keep their zero-copy path
    assert not transfer.host_zeros((2, 3), np.float32, CPU).is_pinned()


def test_inputs_are_concatenated_into_a_buffer_that_grows_to_the_largest_batch_only():
    staging = transfer.Staging(CPU, pin=False)
    parts = [_rows(3, 0), _rows(2, 1)]
    first = staging.to_device("x", parts)
    assert np.array_equal(first.numpy(), np.concatenate(parts))
    smaller = staging.to_device("x", [_rows(1, 2)])
    assert smaller.data_ptr() == first.data_ptr() and np.array_equal(smaller.numpy(), _rows(1, 2))
    larger = staging.to_device("x", [*parts, _rows(4, 3)])  # 9 rows: a new buffer
    assert larger.shape == (9, 2) and np.array_equal(larger[5:].numpy(), _rows(4, 3))
    again = staging.to_device("x", parts)
    assert again.data_ptr() == larger.data_ptr()
    assert staging.to_device("y", parts).data_ptr() != again.data_ptr()  # a buffer per name


def test_each_leaf_of_a_dict_observation_gets_its_own_buffer_and_keeps_its_dtype():
    staging = transfer.Staging(CPU, pin=False)
    parts = [{"image": np.full((n, 3), n, np.uint8), "pos": _rows(n, n, np.float64)} for n in (2, 3)]
    leaves = staging.leaves_to_device("obs", parts)
    assert leaves["image"].dtype == torch.uint8 and leaves["pos"].dtype == torch.float64
    assert leaves["image"][:, 0].tolist() == [2, 2, 3, 3, 3]
    assert np.array_equal(leaves["pos"].numpy(), np.concatenate([p["pos"] for p in parts]))


def test_outputs_come_back_into_reused_buffers():
    staging = transfer.Staging(CPU, pin=False)
    out = staging.to_host("value", torch.arange(6.0).reshape(2, 3).t())  # a strided output
    assert np.array_equal(out, np.arange(6.0).reshape(2, 3).T)
    again = staging.to_host("value", torch.ones(4))
    assert again.ctypes.data == out.ctypes.data and again.tolist() == [1.0] * 4


# ------------------------------------------------------------------------------ acting


def _counting_policy_and_slots(recurrent: bool):
    """A policy and two identical sets of SPLITS inference slots (counting env), obs filled."""
    extra = {"policy": "recurrent-actor-critic", "policy_kwargs": {"hidden": 8}} if recurrent else {}
    graph = build_graph(build_config({
        "experiment": "transfer", "env": "counting", "dataflow": {"envs_per_actor": SPLITS * ENVS,
        "ring_splits": SPLITS, "sample_length": 4, "segment_slots": 2}, **extra,
    }))  # fmt: skip
    torch.manual_seed(0)
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    sets = []
    for _ in range(2):
        arrays = InlineTransport().arrays(actor_block(0), graph.actor_layout())
        slots = [sub_arrays(arrays, f"infer.{s}.") for s in range(SPLITS)]
        for s, slot in enumerate(slots):
            slot[C.OBS][:] = np.random.default_rng(s).normal(size=slot[C.OBS].shape)
        sets.append(slots)
    return policy, sets


def _slots_like(policy, obs: dict[str, np.ndarray], count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """`count` slots of observation columns `obs` (rows shuffled per slot) and output columns
    shaped as the policy's outputs."""
    with torch.no_grad():
        out = policy.rollout(map_obs(torch.from_numpy, obs_of(obs)))
    rng = np.random.default_rng(seed)
    slots = []
    for _ in range(count):
        order = rng.permutation(len(next(iter(obs.values()))))
        slot = {name: a[order].copy() for name, a in obs.items()}
        slot.update({name: np.zeros(t.shape, t.numpy().dtype) for name, t in out.items()})
        slot["version"] = np.zeros(1, np.int64)
        slots.append(slot)
    return slots


def _act_both(plain: Acting, staged: Acting, batches: list[tuple[list, list]], requests) -> None:
    """Each batch of slots acted on by both, from the same torch seed."""
    for k, (mine, theirs) in enumerate(batches):
        for acting, slots in ((plain, mine), (staged, theirs)):
            torch.manual_seed(k)
            acting(slots, requests[: len(slots)])


def _assert_same_outputs(plain_slots, staged_slots, outputs) -> None:
    for mine, theirs in zip(plain_slots, staged_slots, strict=True):
        for name in [*outputs, "version"]:
            assert np.array_equal(mine[name], theirs[name]), name


@pytest.mark.parametrize("recurrent", [False, True])
def test_acting_through_the_staging_writes_what_the_cpu_path_writes_with_one_wait_per_batch(recurrent):
    policy, (mine, theirs) = _counting_policy_and_slots(recurrent)
    staging = CountingStaging()
    plain = Acting(policy, FixedParams())
    staged = Acting(copy.deepcopy(policy), FixedParams(), staging=staging)
    requests = [Request(actor=0, split=s) for s in range(SPLITS)]
    batches = [(mine, theirs), (mine[:1], theirs[:1]), (mine, theirs)]  # a smaller batch between
    for slot in mine + theirs:
        if recurrent:
            slot[C.FIRST][:] = True  # episodes start: the state is reset, then carried
    _act_both(plain, staged, batches[:1], requests)
    for slot in mine + theirs:
        if recurrent:
            slot[C.FIRST][:] = False
    _act_both(plain, staged, batches[1:], requests)
    _assert_same_outputs(mine, theirs, plain.outputs)
    assert staging.waits == 3
    if recurrent:  # the carried states are the CPU path's
        for key, state in plain.hidden.states.items():
            assert np.array_equal(staged.hidden.states[key], state)


def test_a_dict_observation_is_staged_leaf_by_leaf():
    space = gym.spaces.Dict({"image": gym.spaces.Box(0, 255, (3, 5, 5), np.uint8),
                             "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float64)})  # fmt: skip
    torch.manual_seed(0)
    policy = MultiInputActorCritic(space, gym.spaces.Discrete(4))
    space.seed(0)
    rows, _ = obs_buffers(space, 5)
    for i in range(5):
        put_row(rows, space, i, space.sample())
    obs = {column(path): a for path, a in rows.items()}
    mine, theirs = _slots_like(policy, obs, 2, seed=1), _slots_like(policy, obs, 2, seed=1)
    staging = CountingStaging()
    plain = Acting(policy, FixedParams())
    staged = Acting(copy.deepcopy(policy), FixedParams(), staging=staging)
    _act_both(plain, staged, [(mine, theirs)], [Request(0, 0), Request(0, 1)])
    _assert_same_outputs(mine, theirs, plain.outputs)
    assert staging.waits == 1 and {"in/obs/image", "in/obs/pos"} <= set(staging._buffers)


def test_action_noise_is_staged_with_the_observations():
    env = gym.make("MountainCarContinuous-v0")
    torch.manual_seed(0)
    policy = SquashedGaussianMLP(env.observation_space, env.action_space, hidden_sizes=[16])
    obs = {C.OBS: _rows(3, 0)}
    mine, theirs = _slots_like(policy, obs, 2, seed=1), _slots_like(policy, obs, 2, seed=1)
    staging = CountingStaging()
    plain = Acting(policy, FixedParams(), action_noise=ColoredActionNoise(1.0, 100, 1, seed=2))
    staged = Acting(copy.deepcopy(policy), FixedParams(), action_noise=ColoredActionNoise(1.0, 100, 1, seed=2),
                    staging=staging)  # fmt: skip
    requests = [Request(actor=1, split=0), Request(actor=0, split=1)]
    _act_both(plain, staged, [(mine, theirs)] * 3, requests)
    _assert_same_outputs(mine, theirs, plain.outputs)
    assert staging.waits == 3 and "in/noise" in staging._buffers


def test_deterministic_mode_waits_once_per_request():
    policy, (mine, theirs) = _counting_policy_and_slots(recurrent=False)
    staging = CountingStaging()
    plain = Acting(policy, FixedParams(), sampling_seed=1)
    staged = Acting(copy.deepcopy(policy), FixedParams(), sampling_seed=1, staging=staging)
    _act_both(plain, staged, [(mine, theirs)], [Request(actor=0, split=s, key=3) for s in range(SPLITS)])
    _assert_same_outputs(mine, theirs, plain.outputs)
    assert staging.waits == SPLITS  # each request is its own batch (its own seed)


def test_the_evaluator_acts_through_the_staging_as_on_the_cpu():
    policy, ([slot, *_], _) = _counting_policy_and_slots(recurrent=False)
    plain, staged = Player(policy, FixedParams()), Player(copy.deepcopy(policy), FixedParams())
    staged._staging = staging = CountingStaging()
    for k in range(2):
        obs = slot[C.OBS][: 3 - k]  # a smaller batch: the same buffers
        assert np.array_equal(staged.act(obs), plain.act(obs))
    assert staging.waits == 2


# ------------------------------------------------------------------------------ published weights


def test_weights_through_the_staging_are_the_cpus_frames_after_one_wait():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    staging = CountingStaging()
    frames = state_frames(module, staging)
    assert [f.tobytes() for f in frames] == [f.tobytes() for f in state_frames(module)]
    assert staging.waits == 1
    with torch.no_grad():
        module[0].weight.add_(1.0)
    again = state_frames(module, staging)  # the next version, in the same buffers
    assert [f.ctypes.data for f in again] == [f.ctypes.data for f in frames] and staging.waits == 2
    assert again[0].tobytes() == state_frames(module)[0].tobytes()


def test_a_published_version_keeps_its_weights_when_the_staging_is_reused():
    """The frames of version 1 sit in the buffers that version 2 is copied into: the sender must
    have copied them (every Sender does), or subscribers would load version 2's weights as 1's."""
    transport, module = InlineTransport(), torch.nn.Linear(3, 4)
    publisher = ParamPublisher(transport)
    publisher._staging, publisher._staging_known = CountingStaging(), True  # a GPU's path, on the CPU
    first = [f.copy() for f in state_frames(module)]
    publisher.publish(1, module)
    with torch.no_grad():
        module.weight.add_(1.0)
    publisher.publish(2, module)
    service_in = transport.receiver(SERVICE_IN).recv_all()
    assert [m.header[1] for m in service_in] == [1, 2]
    assert [bytes(f) for f in service_in[0].frames] == [f.tobytes() for f in first]
    assert [bytes(f) for f in service_in[1].frames] == [f.tobytes() for f in state_frames(module)]


# ------------------------------------------------------------------------------ replay trainers


def _replay_trainer(experiment: str, run_dir, staging: transfer.Staging | None = None, device: str = "cpu"):
    config = load_config(experiment, [f"run.run_dir={run_dir}", "launch.launcher=inline", f"devices.trainer={device}"])
    kernel = make_replay_trainer(build_graph(config), InlineTransport())
    if staging is not None:
        kernel._staging = staging  # the path a GPU takes, on the CPU
    return kernel


def _fill(batch: dict[str, torch.Tensor], seed: int) -> None:
    """A valid replay batch: actions of the env's range, discounts and weights in [0, 1]."""
    rng = np.random.default_rng(seed)
    for name, t in batch.items():
        a = t.numpy()
        if name == C.ACTION and a.dtype.kind == "i":
            a[:] = rng.integers(0, 2, a.shape)
        elif name in (C.DISCOUNT, C.WEIGHT):
            a[:] = rng.uniform(0.5, 1.0, a.shape)
        elif a.dtype.kind == "f":
            a[:] = rng.normal(size=a.shape)
        else:
            a[:] = np.arange(a.size).reshape(a.shape)


@pytest.mark.parametrize("experiment", ["cartpole-dqn", "pendulum-sac"])
def test_a_replay_trainer_through_the_staging_learns_what_it_learns_in_place(experiment, tmp_path):
    staging = CountingStaging()
    kernels = [_replay_trainer(experiment, tmp_path / "a"), _replay_trainer(experiment, tmp_path / "b", staging)]
    for update in range(3):
        for kernel in kernels:
            _fill(kernel.tensors[0], seed=update)
            torch.manual_seed(update)  # SAC samples actions
            kernel._update(0, env_steps=1000 * (update + 1))
        in_place, staged = (k.tensors[0][C.PRIORITY].numpy() for k in kernels)
        assert np.array_equal(staged, in_place) and in_place.any()  # written back into the slot
    assert [k.version for k in kernels] == [3, 3] and staging.waits == 3
    assert checkpoint.params_sha256(kernels[0].policy) == checkpoint.params_sha256(kernels[1].policy)


# ------------------------------------------------------------------------------ on a GPU

needs_cuda = pytest.mark.gpu


@needs_cuda
@pytest.mark.parametrize("recurrent", [False, True])
def test_acting_on_cuda_writes_the_cpu_policys_outputs_into_the_slots(recurrent):
    policy, (mine, theirs) = _counting_policy_and_slots(recurrent)
    on_gpu = Acting(copy.deepcopy(policy).to("cuda"), FixedParams())
    assert on_gpu._staging is not None and on_gpu._staging.pin
    requests = [Request(actor=0, split=s) for s in range(SPLITS)]
    for k in range(3):
        for slot in theirs:
            if recurrent:
                slot[C.FIRST][:] = k == 0
        on_gpu(theirs, requests)
        assert all(slot["version"][0] == 0 for slot in theirs)
        for slot in theirs:  # the actions it sampled, explained by the CPU policy
            obs, action = torch.from_numpy(slot[C.OBS]), torch.from_numpy(slot[C.ACTION])
            with torch.no_grad():
                if recurrent:  # the value at the state it used (after its resets, in "hidden")
                    no_start = torch.zeros(len(obs), dtype=torch.bool)
                    out, _ = policy.rollout_recurrent(obs, torch.from_numpy(slot[C.HIDDEN]), no_start)
                    np.testing.assert_allclose(slot[C.VALUE], out[C.VALUE].numpy(), rtol=1e-4, atol=1e-5)
                else:
                    expected = policy.analyze(obs, action)
                    for name in (C.LOG_PROB, C.VALUE):
                        np.testing.assert_allclose(slot[name], expected[name].numpy(), rtol=1e-4, atol=1e-5)
    assert all(b.is_pinned() for b in on_gpu._staging._buffers.values())


@needs_cuda
def test_deterministic_actions_on_cuda_are_the_cpus():
    env = gym.make("MountainCarContinuous-v0")
    torch.manual_seed(0)
    policy = SquashedGaussianMLP(env.observation_space, env.action_space, hidden_sizes=[16])
    obs = {C.OBS: _rows(3, 0)}
    mine, theirs = _slots_like(policy, obs, 2, seed=1), _slots_like(policy, obs, 2, seed=1)
    plain = Acting(policy, FixedParams(), action_noise=ColoredActionNoise(1.0, 100, 1, seed=2))
    on_gpu = Acting(copy.deepcopy(policy).to("cuda"), FixedParams(), action_noise=ColoredActionNoise(1.0, 100, 1, seed=2))
    requests = [Request(actor=1, split=0), Request(actor=0, split=1)]
    for _ in range(3):  # the noise decides the action: the same draws give the same actions
        plain(mine, requests)
        on_gpu(theirs, requests)
        for a, b in zip(mine, theirs):
            np.testing.assert_allclose(b[C.ACTION], a[C.ACTION], rtol=1e-4, atol=1e-5)


@needs_cuda
def test_weights_on_cuda_are_published_as_the_cpus_through_reused_pinned_buffers():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    expected = [f.copy() for f in state_frames(module)]
    staging = transfer.Staging(torch.device("cuda"))
    frames = state_frames(module.to("cuda"), staging)
    assert [f.tobytes() for f in frames] == [e.tobytes() for e in expected]
    again = state_frames(module, staging)
    assert [f.ctypes.data for f in again] == [f.ctypes.data for f in frames]
    assert all(b.is_pinned() for b in staging._buffers.values())


@needs_cuda
@pytest.mark.parametrize("experiment", ["cartpole-dqn", "pendulum-sac"])
def test_a_replay_trainer_on_cuda_writes_the_cpus_priorities_into_the_slot(experiment, tmp_path):
    kernels = [_replay_trainer(experiment, tmp_path / "a"), _replay_trainer(experiment, tmp_path / "b", device="cuda")]
    assert kernels[1]._staging is not None and kernels[1]._staging.pin
    for kernel in kernels:
        _fill(kernel.tensors[0], seed=0)
        torch.manual_seed(0)
        kernel._update(0, env_steps=1000)
    on_cpu, on_gpu = (k.tensors[0][C.PRIORITY].numpy() for k in kernels)
    if experiment == "cartpole-dqn":  # SAC's priorities depend on sampled actions: RNGs differ
        np.testing.assert_allclose(on_gpu, on_cpu, rtol=1e-3, atol=1e-4)
    assert on_gpu.any() and kernels[1].version == 1
    assert all(b.is_pinned() for b in kernels[1]._staging._buffers.values())


@needs_cuda
def test_an_on_policy_trainer_on_cuda_gathers_segments_into_pinned_memory(tmp_path):
    config = load_config("cartpole-ppo", [f"run.run_dir={tmp_path}", "launch.launcher=inline", "devices.trainer=cuda"])
    kernel = make_kernel(build_graph(config), WorkerSpec(Role.TRAINER, 0), InlineTransport())
    assert kernel.device.type == "cuda"
    assert all(t.is_pinned() for t in kernel.tensors.values())
    assert all(a.ctypes.data == t.data_ptr() for a, t in zip(kernel.batch.values(), kernel.tensors.values()))
