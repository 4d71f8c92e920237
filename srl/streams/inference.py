"""Inference stream: actors ask for actions, policy workers answer in batches.

Each (actor, ring split) owns one *inference slot* in the actor's shared block: the actor
writes observations into it and sends a `Request`; a policy worker gathers many slots into one
batch, writes actions and policy outputs back into the slots and answers (split,). Delivery:
exactly one reply per request; a split has at most one request in flight, so slots never race.

On a transport that shares no memory (tcp), a request carries the slot's observations and a
reply everything the policy wrote (actions, outputs, version), as raw frames (srl.streams.carry).
Each side takes only messages that name one of its slots, whole (srl.streams.schema).

In deterministic mode a request also says which parameter version must act (`min_version`, counted
from the first version the policy acted with) and
carries a key that seeds its action sampling, so no result depends on how requests were batched.

Restarts (see srl.streams.incarnations): requests and replies carry the actor's epoch and the
request's key (which counts the split's requests), so a reply meant for a dead actor or for an
earlier request is ignored. When its policy worker is restarted, an actor sends its unanswered
requests again; the server drops requests of dead actors and any it has already taken.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from srl.data import columns as C
from srl.spaces import is_obs_column
from srl.streams.carry import carry_out, slot_at
from srl.streams.incarnations import NO_RESTARTS, Incarnations
from srl.streams.schema import COUNT, EPOCH, INDEX, Schema, checked
from srl.streams.transport import Receiver, Transport

Slot = dict[str, np.ndarray]  # obs, action, policy outputs, version: see srl.graph.inference_layout


@dataclass(frozen=True)
class Request:
    actor: int
    split: int
    min_version: int = 0  # act only with parameters at least this many versions past the first (deterministic mode)
    key: int = 0  # seeds this request's action sampling (deterministic mode); counts the split's requests
    epoch: int = 0  # the asking actor's epoch


def request_fields(slot: Slot) -> list[str]:
    # what the actor writes into a slot: the observation's columns (one per leaf of a Dict/Tuple
    # space, srl.spaces) and FIRST for recurrent policies; the policy the rest
    return [name for name in slot if is_obs_column(name) or name == C.FIRST]


def reply_fields(slot: Slot) -> list[str]:
    return [name for name in slot if not (is_obs_column(name) or name == C.FIRST)]


def request_schema(actors: list[int], slots: dict[tuple[int, int], Slot] | None) -> Schema:
    """(actor, split, min_version, key, epoch): a slot of an actor this policy worker serves."""
    fields = {"actor": frozenset(actors), "split": INDEX, "min_version": COUNT, "key": COUNT, "epoch": EPOCH}
    return Schema(fields, slot_at(slots, 0, 1), request_fields)


def reply_schema(slots: list[Slot] | None) -> Schema:
    """(split, key, epoch): a slot of this actor."""
    return Schema({"split": INDEX, "key": COUNT, "epoch": EPOCH}, slot_at(slots, 0), reply_fields)


def requests_name(policy_worker: int) -> str:
    return f"policy.{policy_worker}.requests"


def replies_name(actor: int) -> str:
    return f"actor.{actor}.replies"


class InferenceClient:
    """Actor side, served by a policy worker process."""

    def __init__(
        self,
        transport: Transport,
        actor: int,
        policy_worker: int,
        incarnations: Incarnations = NO_RESTARTS,
        *,
        slots: list[Slot] | None = None,
    ) -> None:
        self.actor = actor
        requests = transport.sender(requests_name(policy_worker))  # header (actor, split, ...)
        self._requests = carry_out(transport, requests, slot_at(slots, 1), request_fields)
        name = replies_name(actor)  # header (split, key, epoch)
        self._replies = checked(transport, transport.receiver(name), name, reply_schema(slots))
        self._incarnations = incarnations
        self._server = f"policy:{policy_worker}"
        self.epoch = incarnations.of(f"actor:{actor}")
        self.server_epoch = incarnations.of(self._server)
        self._unanswered: dict[int, tuple[int, int]] = {}  # split -> (min_version, key)
        self.receivers: list[Receiver] = [self._replies]

    def request(self, split: int, min_version: int = 0, key: int = 0) -> None:
        self._unanswered[split] = (min_version, key)
        self._requests.send((self.actor, split, min_version, key, self.epoch))

    def ready(self) -> list[int]:
        out = []
        for message in self._replies.recv_all():
            split, key, epoch = message.header
            if epoch == self.epoch and split in self._unanswered and self._unanswered[split][1] == key:
                del self._unanswered[split]
                out.append(split)
        server_epoch = self._incarnations.of(self._server)
        if server_epoch != self.server_epoch:  # restarted: what the dead one had is lost
            self.server_epoch = server_epoch
            for split, (min_version, key) in self._unanswered.items():
                self._requests.send((self.actor, split, min_version, key, self.epoch))
        return out


class InferenceServer:
    """Policy-worker side: every request waiting now, answered after one batched forward pass."""

    def __init__(
        self,
        transport: Transport,
        policy_worker: int,
        actors: list[int],
        incarnations: Incarnations = NO_RESTARTS,
        *,
        slots: dict | None = None,
    ) -> None:
        name = requests_name(policy_worker)
        self._requests = checked(transport, transport.receiver(name), name, request_schema(actors, slots))
        self._replies = {a: self._reply_sender(transport, a, slots) for a in actors}
        self._incarnations = incarnations
        self._taken: dict[tuple[int, int], tuple[int, int]] = {}  # (actor, split) -> last (epoch, key)
        self.receivers: list[Receiver] = [self._requests]

    @staticmethod
    def _reply_sender(transport: Transport, actor: int, slots: dict[tuple[int, int], Slot] | None):
        mine = {split: slot for (a, split), slot in slots.items() if a == actor} if slots else None
        return carry_out(transport, transport.sender(replies_name(actor)), slot_at(mine, 0), reply_fields)

    def poll(self, limit: int) -> list[Request]:
        out = []
        for message in self._requests.recv_all(limit):
            r = Request(*message.header)
            self._incarnations.observe(f"actor:{r.actor}", r.epoch)  # tcp: our copy may lag a restart
            if r.epoch != self._incarnations.of(f"actor:{r.actor}"):
                continue  # its actor has died since
            if (r.epoch, r.key) <= self._taken.get((r.actor, r.split), (-1, -1)):
                continue  # sent again after a restart, but the first copy got here
            self._taken[(r.actor, r.split)] = (r.epoch, r.key)
            out.append(r)
        return out

    def reply(self, requests: list[Request]) -> None:
        for r in requests:
            self._replies[r.actor].send((r.split, r.key, r.epoch))
