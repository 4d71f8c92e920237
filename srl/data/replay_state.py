"""A replay memory as a flat dict of numpy arrays, and back: what a checkpoint saves of it.

Only the filled rows are kept (the first `size` of the ring: rows fill in index order until the
ring is full), with each row's stamp and, for prioritized replay, its priority (the sum tree's
leaf). The tree's inner nodes are not saved: each is the sum of its children, so rebuilding them
from the leaves gives the same tree bit for bit. The sampling generator's state is kept too, so a
restored memory draws the batches the saved one would have drawn.

No n-step state is pending between segments: each segment's n-step returns are computed from
the segment alone (srl.data.nstep; the segment's last row is its bootstrap row), so the stored
transitions are the whole of it. Everything is a plain array (the generator's state as JSON
text), so the file loads with allow_pickle=False.
"""

from __future__ import annotations

import json

import numpy as np

from srl.data.replay import ReplayMemory

State = dict[str, np.ndarray]
DATA = "data."  # prefix of the stored columns' keys


def memory_state(memory: ReplayMemory) -> State:
    n = memory.size
    state: State = {DATA + name: array[:n] for name, array in memory.data.items()}
    state["stamp"] = memory.stamp[:n]
    state["inserted"] = np.int64(memory.inserted)
    state["capacity"] = np.int64(memory.capacity)
    state["max_priority"] = np.float64(memory.max_priority)
    state["rng"] = np.array(json.dumps(memory.rng.bit_generator.state))
    if memory.tree is not None:
        state["priority"] = memory.tree.get(np.arange(n))
    return state


def restore_memory(memory: ReplayMemory, state: State) -> None:
    """Load `state` into `memory`, which must have the same capacity, columns and replay kind."""
    capacity = int(state["capacity"])
    if capacity != memory.capacity:
        raise ValueError(f"saved replay memory holds {capacity} transitions, this one {memory.capacity}: "
                         "resume with the same replay.capacity")
    saved = sorted(k[len(DATA):] for k in state if k.startswith(DATA))
    if saved != sorted(memory.data):
        raise ValueError(f"saved replay columns {saved} differ from this memory's {sorted(memory.data)}")
    if ("priority" in state) != (memory.tree is not None):
        raise ValueError("saved replay memory and this one differ in replay.prioritized: resume with the same")
    n = len(state["stamp"])
    for name, array in memory.data.items():
        column = state[DATA + name]
        if column.shape[1:] != array.shape[1:] or column.dtype != array.dtype:
            raise ValueError(f"saved replay column {name!r} is {column.dtype}{list(column.shape[1:])}, "
                             f"this memory's {array.dtype}{list(array.shape[1:])}")
        array[:n] = column
    memory.stamp[:] = -1
    memory.stamp[:n] = state["stamp"]
    memory.inserted = int(state["inserted"])
    memory.max_priority = float(state["max_priority"])
    memory.rng.bit_generator.state = json.loads(str(state["rng"]))
    if memory.tree is not None:
        memory.tree.set_leaves(state["priority"])
