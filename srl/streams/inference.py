"""Inference stream: actors ask for actions, policy workers answer in batches.

Each (actor, ring split) owns one *inference slot* in the actor's shared block: the actor
writes observations into it and sends a `Request`; a policy worker gathers many slots into one
batch, writes actions and policy outputs back into the slots and answers (split,). Delivery:
exactly one reply per request; a split has at most one request in flight, so slots never race.

In deterministic mode a request also says which parameter version must act (`min_version`) and
carries a key that seeds its action sampling, so no result depends on how requests were batched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from srl.streams.transport import Receiver, Transport

if TYPE_CHECKING:
    from srl.workers.policy import Acting

Slot = dict[str, np.ndarray]  # obs, action, policy outputs, version: see srl.graph.inference_layout


@dataclass(frozen=True)
class Request:
    actor: int
    split: int
    min_version: int = 0  # act only with parameters at least this new (deterministic mode)
    key: int = 0  # seeds this request's action sampling (deterministic mode)


def requests_name(policy_worker: int) -> str:
    return f"policy.{policy_worker}.requests"


def replies_name(actor: int) -> str:
    return f"actor.{actor}.replies"


class InferenceClient:
    """Actor side, served by a policy worker process."""

    def __init__(self, transport: Transport, actor: int, policy_worker: int) -> None:
        self.actor = actor
        self._requests = transport.sender(requests_name(policy_worker))
        self._replies = transport.receiver(replies_name(actor))
        self.receivers: list[Receiver] = [self._replies]

    def request(self, split: int, min_version: int = 0, key: int = 0) -> None:
        self._requests.send((self.actor, split, min_version, key))

    def ready(self) -> list[int]:
        return [m.header[0] for m in self._replies.recv_all()]


class LocalInferenceClient:
    """Actor side, inference inline in the actor: answered at once, no round trip."""

    def __init__(self, acting: "Acting", slots: list[Slot], actor: int) -> None:
        self._acting = acting  # fills actions and outputs of slots (srl.workers.policy.Acting)
        self._slots = slots
        self._actor = actor
        self._pending: list[Request] = []
        self.receivers: list[Receiver] = acting.params.receivers

    def request(self, split: int, min_version: int = 0, key: int = 0) -> None:
        self._pending.append(Request(self._actor, split, min_version, key))

    def ready(self) -> list[int]:
        now = self._acting.actionable(self._pending)
        if now:
            # all pending is the usual case: skip comparing requests one by one
            full = len(now) == len(self._pending)
            self._pending = [] if full else [r for r in self._pending if r not in now]
            self._acting([self._slots[r.split] for r in now], now)
        return [r.split for r in now]


class InferenceServer:
    """Policy-worker side: every request waiting now, answered after one batched forward pass."""

    def __init__(self, transport: Transport, policy_worker: int, actors: list[int]) -> None:
        self._requests = transport.receiver(requests_name(policy_worker))
        self._replies = {a: transport.sender(replies_name(a)) for a in actors}
        self.receivers: list[Receiver] = [self._requests]

    def poll(self, limit: int) -> list[Request]:
        return [Request(*m.header[:4]) for m in self._requests.recv_all(limit)]

    def reply(self, requests: list[Request]) -> None:
        for r in requests:
            self._replies[r.actor].send((r.split,))
