"""Inference stream: actors ask for actions, policy workers answer in batches.

Each (actor, ring split) owns one *inference slot* in the actor's shared block: the actor
writes observations into it and sends (actor, split); a policy worker gathers many slots into
one batch, writes actions and policy outputs back into the slots and answers (split,). Delivery:
exactly one reply per request; a split has at most one request in flight, so slots never race.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from srl.streams.transport import Receiver, Transport

Slot = dict[str, np.ndarray]  # obs, action, policy outputs, version: see srl.graph.inference_layout


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

    def request(self, split: int) -> None:
        self._requests.send((self.actor, split))

    def ready(self) -> list[int]:
        return [m.header[0] for m in self._replies.recv_all()]


class LocalInferenceClient:
    """Actor side, inference inline in the actor: answered at once, no round trip."""

    def __init__(self, act: Callable[[list[Slot]], None], slots: list[Slot]) -> None:
        self._act = act  # fills actions and outputs of the given slots (srl.workers.policy.Acting)
        self._slots = slots
        self._pending: list[int] = []
        self.receivers: list[Receiver] = []

    def request(self, split: int) -> None:
        self._pending.append(split)

    def ready(self) -> list[int]:
        splits, self._pending = self._pending, []
        if splits:
            self._act([self._slots[s] for s in splits])
        return splits


class InferenceServer:
    """Policy-worker side: every request waiting now, answered after one batched forward pass."""

    def __init__(self, transport: Transport, policy_worker: int, actors: list[int]) -> None:
        self._requests = transport.receiver(requests_name(policy_worker))
        self._replies = {a: transport.sender(replies_name(a)) for a in actors}
        self.receivers: list[Receiver] = [self._requests]

    def poll(self, limit: int) -> list[tuple[int, int]]:
        return [(m.header[0], m.header[1]) for m in self._requests.recv_all(limit)]

    def reply(self, refs: list[tuple[int, int]]) -> None:
        for actor, split in refs:
            self._replies[actor].send((split,))
