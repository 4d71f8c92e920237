"""The buffer worker's replay memory saved with the checkpoint and restored on resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from srl import checkpoint
from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.replay import ReplayMemory, batch_fields, transition_fields
from srl.data.replay_state import memory_state, restore_memory

OBS, ACT = FieldSpec((3,), np.float32), FieldSpec((), np.int64)


def filled_memory(prioritized: bool, capacity: int = 50, count: int = 70, seed: int = 3) -> ReplayMemory:
    """A memory that has wrapped around (count > capacity), with priorities reported for a batch."""
    memory = ReplayMemory(transition_fields(OBS, ACT), capacity, prioritized=prioritized, seed=seed)
    rng = np.random.default_rng(0)
    for first in range(0, count, 10):
        memory.add({C.OBS: rng.normal(size=(10, 3)).astype(np.float32), C.ACTION: np.arange(first, first + 10),
                    C.REWARD: rng.normal(size=10).astype(np.float32), C.DISCOUNT: np.full(10, 0.99, np.float32),
                    C.NEXT_OBS: rng.normal(size=(10, 3)).astype(np.float32)})
    batch = new_batch()
    memory.sample(batch)
    memory.update_priorities(batch[C.INDEX], batch[C.STAMP], rng.random(len(batch[C.INDEX])) * 5)
    return memory


def new_batch(size: int = 16) -> dict[str, np.ndarray]:
    return {n: np.zeros((size, *f.shape), f.dtype) for n, f in batch_fields(OBS, ACT).items()}


@pytest.mark.parametrize("prioritized", [True, False])
def test_a_restored_memory_equals_the_saved_one_and_samples_the_same(tmp_path, prioritized):
    saved = filled_memory(prioritized)
    checkpoint.save_replay(tmp_path, memory_state(saved))
    restored = ReplayMemory(transition_fields(OBS, ACT), 50, prioritized=prioritized, seed=99)
    restore_memory(restored, checkpoint.load_replay(tmp_path))
    for name in saved.data:
        np.testing.assert_array_equal(restored.data[name], saved.data[name])
    np.testing.assert_array_equal(restored.stamp, saved.stamp)
    assert (restored.inserted, restored.size, restored.max_priority) == (saved.inserted, 50, saved.max_priority)
    if prioritized:
        np.testing.assert_array_equal(restored.tree.tree, saved.tree.tree)  # inner sums rebuilt bit for bit
    a, b = new_batch(), new_batch()
    saved.sample(a)
    restored.sample(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_only_filled_rows_are_written(tmp_path):
    memory = filled_memory(True, capacity=1000, count=30)
    state = memory_state(memory)
    assert len(state["stamp"]) == 30 and state[f"data.{C.OBS}"].shape == (30, 3)
    restored = ReplayMemory(transition_fields(OBS, ACT), 1000, prioritized=True)
    restore_memory(restored, state)
    assert restored.size == 30 and (restored.stamp[30:] == -1).all()
    assert restored.tree.total == pytest.approx(memory.tree.total)


@pytest.mark.parametrize(
    "capacity,prioritized,match", [(40, True, "replay.capacity"), (50, False, "replay.prioritized")]
)
def test_a_mismatched_memory_is_refused_by_name(capacity, prioritized, match):
    state = memory_state(filled_memory(True))
    other = ReplayMemory(transition_fields(OBS, ACT), capacity, prioritized=prioritized)
    with pytest.raises(ValueError, match=match.replace(".", r"\.")):
        restore_memory(other, state)


def test_the_file_holds_no_pickle(tmp_path):
    path = checkpoint.save_replay(tmp_path, memory_state(filled_memory(True)))
    with np.load(path, allow_pickle=False) as saved:
        assert all(saved[name].dtype != object for name in saved.files)


def test_a_resumed_run_starts_from_the_saved_replay(run_dir):
    """cartpole-dqn runs, stops (its buffer saves the replay at exit); the buffer worker a resumed
    run builds holds exactly what was saved; the resumed run completes and goes on storing."""
    from srl.config.load import load_config
    from srl.graph import build_graph
    from srl.graph.build_replay import make_buffer
    from srl.launch.run import run_experiment
    from srl.streams.inline import InlineTransport

    first = ["stop.total_env_steps=2000", "replay.warmup=500", "stop.target_return=null", f"run.run_dir={run_dir}",
             "monitor.display=off", "monitor.learning_curve=false"]
    assert run_experiment(load_config("cartpole-dqn", first)) == 0
    saved = checkpoint.load_replay(run_dir)
    assert saved is not None and int(saved["inserted"]) >= 1000, "the buffer saved no replay at exit"

    goal = checkpoint.latest_meta(run_dir)["env_steps"] + 1500  # a resumed run counts on from its checkpoint
    resumed = load_config("cartpole-dqn", [f"run.resume={run_dir}", f"stop.total_env_steps={goal}", "monitor.display=off"])
    transport = InlineTransport()
    try:
        buffer = make_buffer(build_graph(resumed), transport)
        state = buffer.state()
    finally:
        transport.close()
    assert sorted(state) == sorted(saved)
    for name in saved:
        np.testing.assert_array_equal(state[name], saved[name], err_msg=name)

    assert run_experiment(resumed) == 0
    after = checkpoint.load_replay(run_dir)
    assert int(after["inserted"]) > int(saved["inserted"])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["env_steps"] >= goal, summary


def test_a_restarted_buffer_worker_loads_the_saved_replay(tmp_path):
    from srl.config.load import load_config
    from srl.graph import WorkerSpec, build_graph
    from srl.launch.supervise import restart_graph
    from srl.streams.control import Role

    graph = build_graph(load_config("cartpole-dqn", [f"run.run_dir={tmp_path}"]))
    assert graph.lanes[0].graph.config.run.resume is None
    again = restart_graph(graph, WorkerSpec(Role.BUFFER, 0))  # built from its lane's graph (srl.graph.build)
    assert again.lanes[0].graph.config.run.resume == str(tmp_path)
    assert restart_graph(graph, WorkerSpec(Role.ACTOR, 0)).lanes[0].graph.config.run.resume is None


@pytest.mark.parametrize("capacity", [1, 2, 5, 64, 1000])
def test_rebuilding_a_sum_tree_from_its_leaves_matches_incremental_updates(capacity):
    from srl.data.sumtree import SumTree

    rng = np.random.default_rng(capacity)
    incremental, rebuilt = SumTree(capacity), SumTree(capacity)
    for _ in range(5):  # updates in random order and overlapping batches, as a run makes them
        index = rng.integers(0, capacity, size=max(1, capacity // 2))
        incremental.update(index, rng.random(len(index)) * 3)
    filled = int(np.max(np.nonzero(incremental.get(np.arange(capacity)))[0], initial=-1)) + 1
    rebuilt.set_leaves(incremental.get(np.arange(filled)))
    np.testing.assert_array_equal(rebuilt.tree, incremental.tree)
