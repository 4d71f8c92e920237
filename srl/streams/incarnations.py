"""Incarnations: which life of each worker is the current one, kept in a shared block.

A restarted worker keeps its role, index, sockets' names and shared slots, so its peers must
tell its messages from those of its dead predecessor that are still in flight. The controller
bumps a worker's *epoch* in this block after the old process is dead and before the new one
starts; messages carry the epoch of their sender (and of the receiver they were meant for), and
a message from another epoch is dropped:

- samples stamped with a dead actor's epoch are dropped by the trainer, which also re-reads the
  epoch after copying a segment (a seqlock: a copy that raced a restart is discarded);
- an actor that sees the trainer's epoch change takes back every segment slot it had sent, and
  ignores releases from the dead trainer; the new trainer drops samples meant for the old one;
- an actor that sees its policy worker's epoch change sends its unanswered requests again; the
  policy worker drops requests of dead actors and repeated ones.

The block is one int64 per worker, written only by the controller; readers poll it (a few
nanoseconds), so no message is needed to learn of a restart.

Over tcp nothing is shared: every process keeps its own copy. The controller broadcasts what
changed, as (worker, epoch) pairs (`pairs`), once after each batch of bumps; a restarted worker
starts from the controller's copy, and a receiver that meets a later epoch than its copy holds
takes it (`observe`): epochs only grow, and messages are signed, so a later epoch is news, never
a forgery. A message on a PUB socket can be missed (a peer reconnecting, a full queue): the
controller also sends the pairs of every worker ever restarted again, a few a second in turn
(srl.launch.supervise), so a peer that missed one catches up within (restarted workers / pairs a
second) seconds. That costs each peer a bounded number of bytes a second, whatever the run's
size; sending the whole vector again every second, as srl did, cost 8 N bytes to each of N
peers: N^2.
"""

from __future__ import annotations

import numpy as np

from srl.streams.layout import ArraySpec, Layout

INCARNATIONS_BLOCK = "incarnations"


def incarnations_layout(workers: list[str]) -> Layout:
    return Layout({"epoch": ArraySpec((max(len(workers), 1),), np.dtype(np.int64))})


class Incarnations:
    """Epoch of each worker by name ("actor:0"); a worker not listed is always in epoch 0."""

    def __init__(self, workers: list[str], epochs: np.ndarray | None = None) -> None:
        self._index = {w: i for i, w in enumerate(workers)}
        # every worker's epoch, in the order of the worker list (this process's copy)
        self.epochs = np.zeros(max(len(workers), 1), np.int64) if epochs is None else epochs

    def of(self, worker: str) -> int:
        i = self._index.get(worker)
        return 0 if i is None else int(self.epochs[i])

    def renamed(self, names: dict[str, str]) -> Incarnations:
        """The same epochs, with each worker in `names` also known by its key (a policy lane's
        own name for it: srl.graph.lanes)."""
        if not names:
            return self
        view = Incarnations([], self.epochs)
        view._index = {**self._index, **{own: self._index[run] for own, run in names.items() if run in self._index}}
        return view

    def observe(self, worker: str, epoch: int) -> None:
        """A message came from `worker` in `epoch`: a later epoch than ours means it restarted.
        (Over shared memory the controller wrote it first, so this never writes there.)"""
        i = self._index.get(worker)
        if i is not None and epoch > self.epochs[i]:
            self.epochs[i] = epoch

    def pairs(self, workers: list[str]) -> np.ndarray:
        """[[position, epoch], ...] of `workers` in this copy: what the controller broadcasts."""
        positions = np.array([self._index[w] for w in workers], np.int64)
        return np.stack([positions, self.epochs[positions]], axis=1)

    def bump(self, worker: str) -> int:
        """The controller's part: `worker` starts a new life; returns its new epoch."""
        self.epochs[self._index[worker]] += 1
        return int(self.epochs[self._index[worker]])


NO_RESTARTS = Incarnations([])  # for kernels built without a launcher (tests): every epoch is 0
