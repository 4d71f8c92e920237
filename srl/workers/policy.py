"""Policy worker kernel: batched inference for many actors, always with the newest parameters.

`Acting` is the shared piece: it runs the policy over a list of inference slots. The policy
worker uses it for every request waiting at once (dynamic batching across actors); an actor with
inference=inline uses the same object on its own slots.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from srl.api.policy import Policy
from srl.data import columns as C
from srl.streams.inference import InferenceServer, Slot
from srl.streams.params import ParamSubscriber
from srl.streams.transport import Receiver


class Acting:
    def __init__(self, policy: Policy, params: ParamSubscriber, deterministic: bool = False) -> None:
        self.policy = policy.eval()
        self.params = params
        self.deterministic = deterministic
        self.outputs = [C.ACTION, *policy.rollout_fields()]
        self.rows = 0  # rows acted on since the last report
        self.batches = 0
        self.infer_time_s = 0.0

    @property
    def has_params(self) -> bool:
        if self.params.version < 0:
            self.params.poll(self.policy)
        return self.params.version >= 0

    def __call__(self, slots: list[Slot]) -> None:
        started = time.perf_counter()
        self.params.poll(self.policy)
        obs = slots[0][C.OBS] if len(slots) == 1 else np.concatenate([s[C.OBS] for s in slots])
        with torch.inference_mode():
            out = self.policy.rollout(torch.from_numpy(obs), deterministic=self.deterministic)
            out = {name: out[name].numpy() for name in self.outputs}
        start = 0
        for slot in slots:
            stop = start + len(slot[C.OBS])
            for name in self.outputs:
                slot[name][:] = out[name][start:stop]
            slot["version"][0] = self.params.version
            start = stop
        self.rows += start
        self.batches += 1
        self.infer_time_s += time.perf_counter() - started

    def report(self) -> dict:
        out = {
            "rows": self.rows,
            "batches": self.batches,
            "infer_time_s": round(self.infer_time_s, 4),
            "policy_version": self.params.version,
        }
        self.rows, self.batches, self.infer_time_s = 0, 0, 0.0
        return out


class PolicyWorkerKernel:
    def __init__(self, acting: Acting, server: InferenceServer, slots: dict[tuple[int, int], Slot]) -> None:
        self.acting = acting
        self.server = server
        self.slots = slots  # (actor, split) -> inference slot
        self._waiting: list[tuple[int, int]] = []

    @property
    def receivers(self) -> list[Receiver]:
        return self.server.receivers + self.acting.params.receivers

    def start(self) -> None:
        pass

    def poll(self) -> bool:
        self._waiting += self.server.poll(limit=len(self.slots))
        if not self._waiting or not self.acting.has_params:
            return False
        refs, self._waiting = self._waiting, []
        self.acting([self.slots[ref] for ref in refs])
        self.server.reply(refs)
        return True

    def report(self) -> dict:
        return self.acting.report()

    def close(self) -> None:
        pass
