"""Acting on CUDA (srl.workers.cuda_acting): outputs packed into one buffer and split back, batches
padded to a captured graph size, the graphs switch resolved, slots' pages merged for pinning, and
the CPU keeping its plain path; where CUDA exists (marked gpu), graphed acting answers as eager
acting does, and inference slots are pinned and unpinned."""

from __future__ import annotations

import concurrent.futures
import multiprocessing

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl.config import ConfigError
from srl.config.load import load_config
from srl.graph import build_graph, initial_policy
from srl.models.cnn import ActorCriticCNN
from srl.models.mlp import ActorCriticMLP
from srl.streams.inference import Request
from srl.streams.params import FixedParams
from srl.workers.cuda_acting import (
    ALIGN_BYTES,
    GRAPH_ROWS,
    graph_rows_for,
    pack,
    pack_layout,
    packed_nbytes,
    page_ranges,
    unpack,
    use_graphs,
)
from srl.workers.policy import Acting

SPACES = {
    "discrete": gym.spaces.Discrete(3),
    "continuous": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
    "multi-discrete": gym.spaces.MultiDiscrete(np.array([[2, 3, 4], [5, 2, 2]])),
}


@pytest.mark.parametrize("kind", list(SPACES))
@pytest.mark.parametrize("rows", [1, 3, 64])
def test_outputs_go_back_in_one_packed_buffer_and_come_out_as_they_went_in(kind, rows):
    """A policy's outputs for each kind of action packed into one uint8 buffer and split back:
    the same values, dtypes and shapes, each part aligned (3 rows of float32 need padding)."""
    torch.manual_seed(0)
    policy = ActorCriticMLP(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), SPACES[kind])
    names = ["action", *policy.rollout_fields()]
    with torch.inference_mode():
        out = policy.rollout(torch.randn(rows, 4))
    packed, layout = pack(out, names)
    assert packed.dtype == torch.uint8 and packed.dim() == 1 and packed.numel() == packed_nbytes(layout)
    assert all(part.offset % ALIGN_BYTES == 0 for part in layout) and [p.name for p in layout] == names
    back = unpack(packed.numpy(), layout)
    for name in names:
        assert back[name].dtype == out[name].numpy().dtype and back[name].shape == tuple(out[name].shape)
        np.testing.assert_array_equal(back[name], out[name].numpy())
    first = unpack(packed.numpy(), layout, rows=1)
    assert all(np.array_equal(first[n], out[n].numpy()[:1]) for n in names)


def test_packing_keeps_odd_dtypes_and_widens_bfloat16():
    tensors = {"flag": torch.tensor([True, False, True]), "half": torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16),
               "wide": torch.arange(3, dtype=torch.float64)}
    packed, layout = pack(tensors, ["flag", "half", "wide"])
    assert [p.dtype for p in layout] == [np.dtype(bool), np.dtype(np.float32), np.dtype(np.float64)]
    assert [p.offset for p in layout] == [0, 8, 24]  # 3 bools padded to 8, 3 float32 (12 bytes) to 16
    back = unpack(packed.numpy(), layout)
    np.testing.assert_array_equal(back["flag"], [True, False, True])
    np.testing.assert_array_equal(back["half"], [1.5, -2.0, 3.25])
    np.testing.assert_array_equal(back["wide"], [0.0, 1.0, 2.0])
    assert pack_layout(tensors, ["wide"])[0].offset == 0


def test_a_batch_is_padded_to_the_next_captured_size():
    assert graph_rows_for(1) == 1 and graph_rows_for(2) == 8 and graph_rows_for(64) == 64
    assert graph_rows_for(65) == 128 and graph_rows_for(GRAPH_ROWS[-1]) == GRAPH_ROWS[-1]
    assert graph_rows_for(GRAPH_ROWS[-1] + 1) is None  # larger than any graph: eager
    assert graph_rows_for(5, (4, 16)) == 16 and graph_rows_for(0, (4, 16)) == 4


def test_graphs_are_used_only_where_they_can_be():
    cuda, cpu = torch.device("cuda", 0), torch.device("cpu")
    mlp = ActorCriticMLP(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    cnn = ActorCriticCNN(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), gym.spaces.Discrete(6))
    assert use_graphs("auto", cuda, mlp, None, None) and use_graphs("auto", cuda, cnn, None, None)
    assert not use_graphs("auto", cpu, mlp, None, None) and not use_graphs("on", cpu, mlp, None, None)
    assert not use_graphs("off", cuda, mlp, None, None)
    assert not use_graphs("auto", cuda, mlp, 3, None)  # deterministic mode reseeds per request
    assert not use_graphs("auto", cuda, mlp, None, object())  # action noise drawn per request

    class Unsure(ActorCriticMLP):
        graph_safe = False

    class Recurrent(ActorCriticMLP):
        recurrent = True

    unsure = Unsure(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert not use_graphs("auto", cuda, unsure, None, None) and use_graphs("on", cuda, unsure, None, None)
    recurrent = Recurrent(gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))
    assert not use_graphs("on", cuda, recurrent, None, None)
    with pytest.raises(ValueError, match="devices.policy_graphs"):
        use_graphs("sometimes", cuda, mlp, None, None)


def test_the_switch_is_a_config_field_checked_before_launch(run_dir):
    assert load_config("cartpole-ppo", []).devices.policy_graphs == "auto"
    assert load_config("cartpole-ppo", ["devices.policy_graphs=off"]).devices.policy_graphs == "off"
    with pytest.raises(ConfigError, match=r"devices\.policy_graphs"):
        load_config("cartpole-ppo", ["devices.policy_graphs=sometimes", f"run.run_dir={run_dir}"])
    assert not run_dir.exists()


def test_slot_pages_are_merged_for_pinning():
    page = 4096
    block = np.zeros(3 * page, np.uint8)
    base = block.ctypes.data
    first, second, far = block[10:20], block[100:page + 5], block[2 * page + 1:2 * page + 2]
    ranges = page_ranges([far, second, first, block[:0]], page)
    start = base // page * page
    # first and second share a page: one range; far's page is separate unless it touches
    assert ranges[0][0] == start and sum(size for _, size in ranges) % page == 0
    covered = [(s, s + n) for s, n in ranges]
    for array in (first, second, far):
        assert any(s <= array.ctypes.data and array.ctypes.data + array.nbytes <= e for s, e in covered)
    assert all(covered[i][1] < covered[i + 1][0] for i in range(len(covered) - 1))  # none overlap or touch


def _slots(graph, rows_per_slot, seed=0):
    rng = np.random.default_rng(seed)
    slots = []
    for rows in rows_per_slot:
        slot = {name: np.zeros((rows, *spec.shape), spec.dtype) for name, spec in graph.slot_fields().items()}
        slot["version"] = np.zeros(1, np.int64)
        for name, array in slot.items():
            if name.startswith("obs"):
                array[:] = rng.integers(0, 256, array.shape) if array.dtype == np.uint8 else rng.normal(size=array.shape)
        slots.append(slot)
    return slots


def test_on_the_cpu_acting_takes_its_plain_path():
    """devices.policy=cpu: no CUDA path, no graphs, pinning does nothing, and the actions come from
    the policy's own rollout over the concatenated slots."""
    graph = build_graph(load_config("cartpole-ppo", ["monitor.display=off", "launch.launcher=inline"]))
    policy = initial_policy(graph, torch.device("cpu"))
    acting = Acting(policy, FixedParams(), graphs="on")
    assert acting._cuda is None and not acting.graphed
    slots = _slots(graph, [3, 5])
    acting.pin(slots)
    torch.manual_seed(1)
    acting(slots, [Request(0, 0), Request(1, 0)])
    torch.manual_seed(1)
    with torch.inference_mode():
        expected = policy.rollout(torch.from_numpy(np.concatenate([s["obs"] for s in slots])))
    got = np.concatenate([s["action"] for s in slots])
    np.testing.assert_array_equal(got, expected["action"].numpy())
    np.testing.assert_allclose(np.concatenate([s["value"] for s in slots]), expected["value"].numpy(), rtol=1e-6)
    acting.close()


@pytest.mark.parametrize("experiment", ["cartpole-ppo", "bipedalwalker-ppo", "halfcheetah-sac", "pong-ppo"])
def test_the_cuda_path_fills_slots_as_the_plain_path_does(experiment):
    """The CUDA path's own steps (each slot's observations into its rows of one batch, the rollout,
    one packed buffer back, split into each slot) taken on the CPU: the slots get what the plain
    path gives them, for discrete and continuous actions, one slot or several."""
    from srl.workers.cuda_acting import CudaActing

    graph = build_graph(load_config(experiment, ["monitor.display=off", "launch.launcher=inline"]))
    policy = initial_policy(graph, torch.device("cpu"))
    plain = Acting(policy, FixedParams())
    packed = Acting(policy, FixedParams())
    packed._cuda = CudaActing(policy, packed.outputs, torch.device("cpu"), graphs=False)
    for i, rows in enumerate([[1], [3, 5, 2], [64]]):
        slots = _slots(graph, rows, seed=i)
        twins = [{name: array.copy() for name, array in slot.items()} for slot in slots]
        requests = [Request(a, 0) for a in range(len(rows))]
        torch.manual_seed(i)
        plain(slots, requests)
        torch.manual_seed(i)
        packed(twins, requests)
        for slot, twin in zip(slots, twins):
            for name in plain.outputs:
                assert twin[name].dtype == slot[name].dtype
                np.testing.assert_allclose(twin[name], slot[name], rtol=1e-6, atol=1e-6)


# -- on CUDA (each check in a spawned process: the pytest process must not initialise CUDA, as
# the local launcher's forked workers of later tests could then not use it; tests/test_devices.py)


def _in_fresh_process(fn, *args):
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result(timeout=300)


def check_graphed_acts_as_eager(experiment: str, batches: list[list[int]]) -> None:
    """A deterministic rollout (argmax actions) acted eagerly and through graphs on the same slots:
    the same actions, and values equal to float rounding; padded batches included."""
    import functools

    graph = build_graph(load_config(experiment, ["monitor.display=off", "launch.launcher=inline"]))
    cuda = torch.device("cuda", 0)
    eager_policy = initial_policy(graph, cuda)
    graphed_policy = initial_policy(graph, cuda)
    graphed_policy.load_state_dict(eager_policy.state_dict())
    for policy in (eager_policy, graphed_policy):
        policy.rollout = functools.partial(policy.rollout, deterministic=True)
    eager, graphed = Acting(eager_policy, FixedParams(), graphs="off"), Acting(graphed_policy, FixedParams(), graphs="on")
    assert graphed.graphed and not eager.graphed
    for i, rows in enumerate(batches):
        slots = _slots(graph, rows, seed=i)
        twins = [{name: array.copy() for name, array in slot.items()} for slot in slots]
        requests = [Request(a, 0) for a in range(len(rows))]
        eager(slots, requests)
        graphed(twins, requests)
        for slot, twin in zip(slots, twins):
            np.testing.assert_array_equal(slot["action"], twin["action"])
            np.testing.assert_allclose(slot["value"], twin["value"], rtol=2e-2, atol=2e-2)
    fitting = [rows for rows in batches if sum(rows) <= GRAPH_ROWS[-1]]  # the others ran eagerly
    assert graphed._cuda is not None and graphed._cuda.graph_batches == len(fitting) and graphed.graphed


def check_slots_are_pinned_and_unpinned() -> None:
    graph = build_graph(load_config("cartpole-ppo", ["monitor.display=off", "launch.launcher=inline"]))
    acting = Acting(initial_policy(graph, torch.device("cuda", 0)), FixedParams())
    slots = _slots(graph, [4, 4])
    assert not torch.from_numpy(slots[0]["obs"]).is_pinned()
    acting.pin(slots)
    assert all(torch.from_numpy(s["obs"]).is_pinned() for s in slots)
    acting(slots, [Request(0, 0), Request(1, 0)])
    acting.close()
    assert not any(torch.from_numpy(s["obs"]).is_pinned() for s in slots)


@pytest.mark.gpu
@pytest.mark.parametrize("experiment", ["cartpole-ppo", "pong-ppo"])
def test_graphed_acting_gives_the_actions_of_eager_acting(experiment):
    _in_fresh_process(check_graphed_acts_as_eager, experiment, [[1], [3, 4], [64], [8, 8, 8], [1500]])


@pytest.mark.gpu
def test_inference_slots_are_pinned_and_unpinned():
    _in_fresh_process(check_slots_are_pinned_and_unpinned)
