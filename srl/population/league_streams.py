"""A self-play league's snapshots and table over streams, not through the run directory.

    learner's service --<learner>.params.out--> controller (LeagueKeeper: a subscriber like any other)
    controller --<league>.league.out--> the league lane's acting workers (LeaguePool, via LeagueParams)
        (TABLE, seq) + league.json's JSON          every LeagueSpec.refresh_s, and when it changed
        (SNAPSHOT, version) + the learner's tensors when a snapshot is made, and when asked
    acting workers --<league>.league.in--> controller
        (WANT, version)                            a pooled snapshot it does not hold (a late joiner,
                                                   a restarted worker, a broadcast it missed)

The keeper takes a snapshot from the weights it holds (the newest version the learner's service
sent it), so neither it nor the acting workers read a file another node wrote: a league runs on
Ray over tcp with no shared run directory. The snapshots' files (run_dir/league/v<version>.pt) and
league.json are the controller's own, for `srl eval --against v<version>` and a resume.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from srl.graph.dataflow import CONTROLLER, Delivery, StreamSpec
from srl.streams.control import Role
from srl.streams.params import SERVICE_IN, SERVICE_OUT, FixedParams
from srl.streams.schema import COUNT, Kinds, Schema, checked, json_object, one_of
from srl.streams.transport import Message, Receiver, Transport

OUT, IN = "league.out", "league.in"  # under the league lane's prefix
TABLE, SNAPSHOT, WANT = 1, 2, 3
TABLE_BYTES = 1 << 20  # league.json: a row per snapshot ever made, a few hundred bytes each
ASK_S = 1.0  # a worker asks again for a snapshot it still lacks


def with_league_streams(graph: Any) -> None:
    """The streams of each league lane of a run of lanes (srl.graph.lanes_graph), added in place:
    the controller subscribes to its learner's parameters, and serves the lane's acting workers
    (its policy workers, or the actors with inline inference, and the run's evaluator)."""
    for lane in graph.lanes:
        spec = graph.config.policies[lane.name].league
        if spec is None:
            continue
        learner = next(other for other in graph.lanes if other.name == spec.of)
        asks, takes = learner.prefix + SERVICE_IN, learner.prefix + SERVICE_OUT
        for k, st in enumerate(graph.streams):
            if st.name == asks:
                graph.streams[k] = replace(st, producers=(*st.producers, CONTROLLER))
            elif st.name == takes:
                graph.streams[k] = replace(st, consumers=(*st.consumers, CONTROLLER))
        tensors = next(st.frames for st in graph.streams if st.name == takes)
        own = [name for name in lane.names.values() if name.startswith(f"{Role.POLICY.title}:")]
        acting = tuple(own or [w.name for w in graph.workers if w.role == Role.ACTOR])
        acting += tuple(w.name for w in graph.workers if w.role == Role.EVAL)
        graph.streams.append(StreamSpec(
            lane.prefix + OUT, "params", CONTROLLER, (CONTROLLER,), acting, Delivery.BROADCAST,
            "league snapshots and table", (*tensors, TABLE_BYTES)))
        graph.streams.append(StreamSpec(
            lane.prefix + IN, "params", CONTROLLER, acting, (CONTROLLER,), Delivery.BOUNDED, "snapshots asked for", ()))


def out_schema(tensors: Sequence[int]) -> Kinds:
    return Kinds({
        TABLE: Schema({"kind": one_of(TABLE), "seq": COUNT}, frame_bytes=(None,), content=_json_object),
        SNAPSHOT: Schema({"kind": one_of(SNAPSHOT), "version": COUNT}, frame_bytes=tensors),
    })  # fmt: skip


def in_schema() -> Kinds:
    return Kinds({WANT: Schema({"kind": one_of(WANT), "version": COUNT})})


def _json_object(message: Message) -> None:
    json_object(message.frames[0], "a league table")


class LeagueParams(FixedParams):
    """In place of a ParamSubscriber for the league-pool policy (srl.population.league_pool): its
    version stays 0 (it trains nothing; lock step does not wait on it), and each poll hands it the
    tables and snapshots that came, and asks for the pooled snapshots it still lacks."""

    def __init__(self, transport: Transport, tensors: Sequence[int]) -> None:
        super().__init__()
        self._in = checked(transport, transport.subscriber(OUT), OUT, out_schema(tensors))
        self._ask = transport.sender(IN)
        self.receivers: list[Receiver] = [self._in]
        self._asked_s = -math.inf

    def poll(self, module: Any, waiting_for: int = 0) -> bool:
        messages = self._in.recv_all()
        for message in sorted(messages, key=lambda m: m.header[0] != TABLE):  # tables first: they name the pool
            if message.header[0] == TABLE:
                module.take_table(json.loads(bytes(message.frames[0])))
            else:
                module.take_snapshot(message.header[1], message.frames)
        missing = module.missing()
        now = time.monotonic()
        if missing and now - self._asked_s >= ASK_S:
            for version in missing:
                self._ask.send((WANT, version))
            self._asked_s = now
        return bool(messages)


def table_message(table: dict[str, Any], seq: int) -> tuple[tuple[int, int], list[bytes]]:
    return (TABLE, seq), [json.dumps(table).encode()]
