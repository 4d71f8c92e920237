"""Value-target normalization (the MAPPO paper's ValueNorm; Yu et al., 2022, appendix).

The critic learns normalized targets (G - mean) / std, where mean and std are running statistics
of every value target seen so far; the stored behaviour values are then in the same normalized
units, so GAE first maps them back (`denormalize`) to reward units. The value loss keeps the same
scale as rewards grow or shrink during training, which is what lets one value_coef and one
value_clip_coef fit tasks whose returns span -200 (simple_spread) or +500 (CartPole).

The statistics are exponential moving averages of the batch mean and mean square with a debiasing
weight (as Adam debiases its moments): with beta near 1 they are the plain mean over all targets
seen, and they forget slowly once training has run for 1 / (1 - beta) updates.
"""

from __future__ import annotations

from typing import Any

import torch

VAR_FLOOR = 1e-2  # a near-constant target (a solved task) must not blow normalized values up


class ValueNorm:
    """Running mean / variance of value targets, with normalize and denormalize."""

    def __init__(self, beta: float = 0.99999, eps: float = 1e-5) -> None:
        if not 0.0 < beta < 1.0:
            raise ValueError(f"ValueNorm beta must be in (0, 1), got {beta}")
        self.beta, self.eps = beta, eps
        self.running_mean = torch.zeros((), dtype=torch.float64)
        self.running_mean_sq = torch.zeros((), dtype=torch.float64)
        self.debias = torch.zeros((), dtype=torch.float64)

    def update(self, targets: torch.Tensor) -> None:
        """Fold one batch of targets into the running statistics."""
        x = targets.detach().to(torch.float64).cpu()
        keep = self.beta
        self.running_mean = keep * self.running_mean + (1.0 - keep) * x.mean()
        self.running_mean_sq = keep * self.running_mean_sq + (1.0 - keep) * x.square().mean()
        self.debias = keep * self.debias + (1.0 - keep)

    def mean_std(self) -> tuple[float, float]:
        """The debiased mean and standard deviation (0 and 1 before the first update)."""
        if self.debias.item() == 0.0:
            return 0.0, 1.0
        weight = self.debias.clamp(min=self.eps)
        mean = self.running_mean / weight
        var = (self.running_mean_sq / weight - mean.square()).clamp(min=VAR_FLOOR)
        return float(mean), float(var.sqrt())

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.mean_std()
        return (x - mean) / std

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self.mean_std()
        return x * std + mean

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.running_mean, "mean_sq": self.running_mean_sq, "debias": self.debias}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.running_mean, self.running_mean_sq, self.debias = state["mean"], state["mean_sq"], state["debias"]
