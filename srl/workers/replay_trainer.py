"""Trainer worker kernel for replay algorithms: learns on batches served by the buffer worker.

    batch slot (slot, env_steps) -> algorithm.step(batch) -> |TD| into batch["priority"]
        -> release slot (the buffer reads the priorities) -> version += 1 -> publish

The batch is learned on in place (the tensors view the buffer's shared slot); nothing is copied
but what the algorithm itself reads.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from srl import checkpoint
from srl.api.algorithm import Algorithm
from srl.api.policy import Policy
from srl.streams.batches import BatchClient
from srl.streams.params import ParamPublisher
from srl.streams.transport import Receiver


class ReplayTrainerKernel:
    def __init__(
        self,
        policy: Policy,
        algorithm: Algorithm,
        batches: BatchClient,
        params: ParamPublisher,
        run_dir: Path,
        checkpoint_interval_s: float,
        resume: bool = False,
        max_updates: int | None = None,
    ) -> None:
        self.policy, self.algorithm = policy, algorithm
        self.batches, self.params = batches, params
        self.tensors = [{n: torch.from_numpy(a) for n, a in slot.items()} for slot in batches.slots]
        self.run_dir, self.checkpoint_interval_s = run_dir, checkpoint_interval_s
        self.max_updates = max_updates
        self.version, self.env_steps = 0, 0
        self._reset_stats()
        self._last_checkpoint_s = time.monotonic()
        resumed = checkpoint.load_latest(run_dir) if resume else None
        if resumed is not None:
            policy.load_state_dict(resumed["policy"])
            algorithm.load_state_dict(resumed["algorithm"])
            self.version, self.env_steps = resumed["version"], resumed["env_steps"]

    def _reset_stats(self) -> None:
        self.updates, self.train_time_s = 0, 0.0
        self.stats: dict[str, float] = {}

    @property
    def receivers(self) -> list[Receiver]:
        return self.batches.receivers

    def start(self) -> None:
        self.params.publish(self.version, self.policy)

    def poll(self) -> bool:
        ready = self.batches.poll(limit=1)
        for slot, env_steps in ready:
            if self.max_updates is None or self.version < self.max_updates:
                self._update(slot, env_steps)
            self.batches.release(slot)
        if time.monotonic() - self._last_checkpoint_s > self.checkpoint_interval_s:
            self.save_checkpoint()
        return bool(ready)

    def _update(self, slot: int, env_steps: int) -> None:
        started = time.perf_counter()
        self.env_steps = max(self.env_steps, env_steps)
        self.stats = self.algorithm.step(self.tensors[slot], self.env_steps)
        self.version += 1
        self.params.publish(self.version, self.policy)
        self.updates += 1
        self.train_time_s += time.perf_counter() - started

    def save_checkpoint(self) -> None:
        checkpoint.save(self.run_dir, self.version, self.env_steps, self.policy, self.algorithm.state_dict())
        self._last_checkpoint_s = time.monotonic()

    def report(self) -> dict:
        out = {
            "policy_version": self.version,
            "trained_env_steps": self.env_steps,
            "updates": self.updates,
            "segments_dropped": 0,  # replay keeps every segment
            "policy_lag_mean": None,
            "train_time_s": round(self.train_time_s, 4),
            **self.stats,
        }
        self._reset_stats()
        return out

    def finish(self) -> dict:
        self.save_checkpoint()
        return {**self.report(), "params_sha256": checkpoint.params_sha256(self.policy)}

    def close(self) -> None:
        pass
