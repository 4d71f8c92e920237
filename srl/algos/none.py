"""An algorithm that consumes batches and learns nothing: the trainer end of a sampling benchmark."""

from __future__ import annotations

import torch

from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.registry import register_algorithm


class NoTrainingConfig(AlgorithmConfig):
    pass


class NoTraining(Algorithm):
    trains_recurrent = True  # it trains nothing, so any policy fits: a sampling benchmark's, one that only acts
    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float]:
        return {}


register_algorithm("none", NoTraining, NoTrainingConfig)
