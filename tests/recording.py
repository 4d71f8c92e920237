"""A test-only algorithm that trains nothing and records every batch it is given."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from srl.api import Algorithm, AlgorithmConfig, register_algorithm


class RecordingConfig(AlgorithmConfig):
    out_dir: str  # where each batch's columns are saved, one .npz per update


class RecordingAlgorithm(Algorithm):
    trains_recurrent = True  # it trains nothing: a recurrent policy's batches are recorded as any other's

    def __init__(self, policy, config, total_env_steps):
        super().__init__(policy, config, total_env_steps)
        self.count = 0
        Path(config.out_dir).mkdir(parents=True, exist_ok=True)

    def step(self, batch, env_steps):
        arrays = {k: v.numpy().copy() for k, v in batch.items()}  # every column (obs, terminated, ...)
        # one file per trainer process and update: several trainers of a policy share out_dir
        np.savez(Path(self.config.out_dir) / f"batch-{os.getpid()}-{self.count:06d}.npz", **arrays)
        self.count += 1
        return {"losses/none": 0.0}


register_algorithm("record", RecordingAlgorithm, RecordingConfig)


def load_batches(out_dir: Path) -> list[dict[str, np.ndarray]]:
    return [dict(np.load(p)) for p in sorted(Path(out_dir).glob("batch-*.npz"))]
