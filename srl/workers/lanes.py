"""An actor of a run with several policies (srl.graph.lanes): one ring, a lane per policy.

The actor kernel (srl.workers.actor) runs as in a one-policy run, over inference and segment
slots of every agent's rows held in its own memory (`full_slots`, `full_segments`). The two
objects here stand where its inference port and sample producer stand, and hand each lane its
agents' rows:

- `LanesPort.request` copies each lane's observation rows into that lane's inference slot and
  asks its policy (worker or inline); a split is ready once every lane answered, each answer
  copied back: the action into the full rows, the policy's outputs and version into the lane's
  own columns (`<policy>:<column>`), which only its rows fill;
- `LanesProducer.acquire` holds a segment slot of every lane for a full segment; `send` copies
  each lane's rows into its slot and sends it to that lane's trainer, and tallies each policy's
  episodes from the rows it sends.

Agents whose observation Boxes were padded to the longest (srl.envs.vector) get their own length
back here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from srl.data import columns as C
from srl.graph.lanes import VERSION, lane_column
from srl.monitor.episodes import EpisodeTally, episodes_report
from srl.streams.inference import Slot
from srl.streams.reports import Key, LaneEpisodes, SinkReport
from srl.streams.samples import SampleProducer, Segment
from srl.streams.transport import Receiver
from srl.workers.actor import InferencePort


@dataclass
class LaneRows:
    """Where a lane's rows sit in the actor's full rows, and what it reads of each."""

    name: str
    rows: np.ndarray  # indices into the full rows of one split, in the lane's row order
    obs_lengths: dict[str, int | None]  # obs column -> the lane's length where padded, else None
    outputs: tuple[str, ...]  # the lane's policy columns besides obs and action (its own in the full rows)
    tag: str | None = None  # its policy's episode_tag: the column whose value names an episode's opponent

    def column(self, name: str) -> str:
        return lane_column(self.name, name)

    def take_obs(self, full: dict[str, np.ndarray], lane: dict[str, np.ndarray]) -> None:
        """Its rows of the observation, and of the episode starts where its policy reads them (recurrent)."""
        for col, length in self.obs_lengths.items():
            rows = full[col][self.rows]
            lane[col][:] = rows if length is None else rows[:, :length]
        if C.FIRST in lane:
            lane[C.FIRST][:] = full[C.FIRST][self.rows]


def lane_rows(name: str, agent_rows: tuple[int, ...], agents: int, envs: int, full_obs: dict[str, tuple],
              lane_obs: dict[str, tuple], outputs: tuple[str, ...], tag: str | None = None) -> LaneRows:
    """`full_obs` / `lane_obs`: obs column -> per-row shape in the full rows and the lane's."""
    rows = np.array([e * agents + j for e in range(envs) for j in agent_rows], np.int64)
    lengths = {col: None if lane_obs[col] == full_obs[col] else lane_obs[col][0] for col in lane_obs}
    return LaneRows(name, rows, lengths, outputs, tag)


class LanesPort:
    """The actor's inference port over every lane's (see the module doc)."""

    def __init__(self, lanes: list[LaneRows], ports: list[InferencePort], lane_slots: list[list[Slot]],
                 full_slots: list[Slot]) -> None:
        self.lanes, self.ports, self.lane_slots, self.full_slots = lanes, ports, lane_slots, full_slots
        self.receivers: list[Receiver] = [r for port in ports for r in port.receivers]
        self._waiting: dict[int, set[int]] = {}  # split -> lanes that have not answered yet

    def request(self, split: int, min_version: int = 0, key: int = 0) -> None:
        full = self.full_slots[split]
        self._waiting[split] = set(range(len(self.lanes)))
        for lane, port, slots in zip(self.lanes, self.ports, self.lane_slots):
            lane.take_obs(full, slots[split])
            port.request(split, min_version, key)

    def ready(self) -> list[int]:
        done = []
        for k, (lane, port, slots) in enumerate(zip(self.lanes, self.ports, self.lane_slots)):
            for split in port.ready():
                full, mine = self.full_slots[split], slots[split]
                full[C.ACTION][lane.rows] = mine[C.ACTION]
                for col in lane.outputs:
                    full[lane.column(col)][lane.rows] = mine[col]
                full[lane.column(VERSION)][lane.rows] = mine[VERSION][0]
                waiting = self._waiting[split]
                waiting.discard(k)
                if not waiting:
                    full[VERSION][0] = min(int(s[split][VERSION][0]) for s in self.lane_slots)
                    done.append(split)
        return done


class LanesProducer:
    """The actor's sample producer over every lane's (see the module doc)."""

    def __init__(self, lanes: list[LaneRows], producers: Sequence[SampleProducer | None],
                 full_segments: dict[tuple[int, int], Segment], agents: list[int]) -> None:
        self.lanes, self.producers = lanes, producers  # None: a lane that does not train
        self.slots = full_segments  # (split, slot) -> the full rows' segment, in the actor's memory
        self._free = {s: sorted(k for split, k in full_segments if split == s) for s, _ in full_segments}
        self._held: dict[tuple[int, int], dict[int, int]] = {}  # split, full slot -> lane -> its slot
        self._taking: dict[int, dict[int, int]] = {}  # split -> lane slots acquired toward the next one
        splits = len(self._free)
        self._tallies = [[EpisodeTally(len(lane.rows), n) for _ in range(splits)] for lane, n in zip(lanes, agents)]
        self._episodes: list[tuple[list[float], list[int]]] = [([], []) for _ in lanes]
        # a tagged lane's results by tag (its opponent), as [wins, draws, losses] of its own returns
        self._results: list[dict[str, list[int]]] = [{} for _ in lanes]

    @property
    def receivers(self) -> list[Receiver]:
        return [r for p in self.producers if p is not None for r in p.receivers]

    def collect_releases(self) -> None:
        for p in self.producers:
            if p is not None:
                p.collect_releases()

    def acquire(self, split: int) -> int | None:
        """A full segment slot once every lane that trains has a slot of its own for it."""
        if not self._free[split]:
            return None
        taking = self._taking.setdefault(split, {})
        for k, p in enumerate(self.producers):
            if p is not None and k not in taking:
                slot = p.acquire(split)
                if slot is None:
                    return None
                taking[k] = slot
        full = self._free[split].pop(0)
        self._held[(split, full)] = self._taking.pop(split)
        return full

    def send(self, split: int, slot: int) -> None:
        segment = self.slots[(split, slot)]
        for k, (lane, p) in enumerate(zip(self.lanes, self.producers)):
            self._tally(k, split, segment)
            if p is None:
                continue
            mine = p.slots[(split, self._held[(split, slot)][k])]
            for col, length in lane.obs_lengths.items():
                rows = segment[col][:, lane.rows]
                mine[col][:] = rows if length is None else rows[:, :, :length]
            for col in (C.ACTION, C.REWARD, C.TERMINATED, C.TRUNCATED):
                mine[col][:] = segment[col][:, lane.rows]
            for col in lane.outputs:
                mine[col][:] = segment[lane.column(col)][:, lane.rows]
            mine[C.POLICY_VERSION][:] = segment[lane.column(VERSION)][:, lane.rows]
            p.send(split, self._held[(split, slot)][k])
        del self._held[(split, slot)]
        self._free[split].append(slot)

    def _tally(self, k: int, split: int, segment: Segment) -> None:
        """Lane k's episodes that ended in this segment (rows 0..T-1 hold its steps' rewards)."""
        lane, tally, (returns, lengths) = self.lanes[k], self._tallies[k][split], self._episodes[k]
        reward = segment[C.REWARD][:-1, lane.rows]
        done = segment[C.TERMINATED][:-1, lane.rows] | segment[C.TRUNCATED][:-1, lane.rows]
        for t in range(len(reward)):
            r, n = tally.step(reward[t], done[t])
            returns += r
            lengths += n
            if r and lane.tag is not None:
                self._tag(k, segment[lane.column(lane.tag)][t, lane.rows][tally.ended(done[t])], r)

    def _tag(self, k: int, tags: np.ndarray, returns: list[float]) -> None:
        """The episodes that just ended (in row order, as the tally gave their returns) under their tags."""
        for tag, ret in zip(tags.reshape(len(tags), -1)[:, 0].tolist(), returns):
            counts = self._results[k].setdefault(f"{tag:.15g}", [0, 0, 0])  # exact for versions past 1e6
            counts[0 if ret > 0 else 1 if ret == 0 else 2] += 1

    def report(self) -> SinkReport:
        lost = sum(p.report()[Key.SEGMENTS_LOST] for p in self.producers if p is not None)
        policies: dict[str, LaneEpisodes] = {}
        for lane, episodes, results in zip(self.lanes, self._episodes, self._results):
            policies[lane.name] = {**episodes_report(*episodes)}
            if results:
                policies[lane.name][Key.RESULTS] = results
        self._episodes, self._results = [([], []) for _ in self.lanes], [{} for _ in self.lanes]
        return {Key.SEGMENTS_LOST: lost, Key.POLICIES: policies}
