"""Trainers of one group in forked processes, for tests of srl.streams.gradients: one store, one
process per rank, what each rank's function returns collected by rank.

    results = run_trainer_group(step_half_batch)  # {0: ..., 1: ...}

`trainer(rank, store_address)` runs in a forked process on one torch thread (as srl's trainers do)
and returns something picklable. A rank that raises hands its traceback back, so the test fails at
once with it, not after the queue's timeout."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Callable
from typing import Any

import torch

from srl.streams.gradients import TrainerGroupStore


def run_trainer_group(trainer: Callable[[int, Any], Any], world_size: int = 2, timeout_s: float = 120,
                      store: TrainerGroupStore | None = None) -> dict[int, Any]:
    """`store`: the caller's, left open (a test of the store itself); else one made and closed here."""
    own_store = store is None
    store = store or TrainerGroupStore("127.0.0.1", world_size=world_size)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_run_rank, args=(trainer, rank, store.address, out)) for rank in range(world_size)]
    try:
        for p in procs:
            p.start()
        results = dict(out.get(timeout=timeout_s) for _ in procs)
        for p in procs:
            p.join(timeout=30)
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if own_store:
            store.close()
    failed = {rank: r.trace for rank, r in results.items() if isinstance(r, _Failed)}
    assert not failed, "\n".join(f"rank {rank} failed:\n{trace}" for rank, trace in failed.items())
    assert [p.exitcode for p in procs] == [0] * world_size, [p.exitcode for p in procs]
    return results


class _Failed:
    def __init__(self, trace: str) -> None:
        self.trace = trace


def _run_rank(trainer: Callable[[int, Any], Any], rank: int, address: Any, out: Any) -> None:
    torch.set_num_threads(1)
    try:
        result = trainer(rank, address)
    except BaseException:
        out.put((rank, _Failed(traceback.format_exc())))
        raise
    out.put((rank, result))
