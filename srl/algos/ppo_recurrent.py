"""PPO's epochs for recurrent policies: the core re-runs through each segment from its stored state.

The batch is [T + 1, B] as for feed-forward PPO, plus the columns `hidden` (state entering each
step, as the acting policy used it) and `first` (the step starts an episode). One minibatch is a
set of whole segment rows (columns of the batch), so the core can run over their T steps:

    out = policy.analyze_sequence(obs[:T, rows], action[:T, rows], hidden[0, rows], first[:T, rows])

The first `burn_in` steps only warm the state up (R2D2): with parameters newer than the acting
ones, the stored state at row 0 is a little stale, and these steps let the new parameters rebuild
it before any step enters the loss. Their advantages and returns are dropped, not their inputs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from srl.algos.actor_critic import explained_variance
from srl.api.policy import Policy
from srl.data.columns import ACTION, FIRST, HIDDEN, LOG_PROB, OBS, VALUE

# PPO.apply_loss: one gradient step on the policy's view of flat rows given (old log_prob, old
# value, advantage, returns); its stats as one tensor
ApplyLoss = Callable[[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def recurrent_epochs(
    policy: Policy, apply_loss: ApplyLoss, batch: dict[str, torch.Tensor], advantage: torch.Tensor,
    returns: torch.Tensor, epochs: int, num_minibatches: int, burn_in: int,
) -> tuple[torch.Tensor, float]:
    """`epochs` passes over the batch's segment rows, one `apply_loss` per minibatch: the mean of
    its stats, and the explained variance of the stored values of the loss steps."""
    steps, width = advantage.shape  # T, B
    if num_minibatches > width:
        raise ValueError(
            f"algo.num_minibatches ({num_minibatches}) exceeds the {width} segment rows of a batch "
            "(a recurrent policy's minibatches are whole rows)"
        )
    if not 0 <= burn_in < steps:
        raise ValueError(f"algo.burn_in ({burn_in}) must be in [0, dataflow.sample_length={steps})")
    kept = slice(burn_in, steps)  # the time steps that enter the loss
    old_log_prob, old_value = batch[LOG_PROB][:steps].float(), batch[VALUE][:steps].float()
    totals: torch.Tensor | None = None  # the sum of the minibatches' stats
    for _ in range(epochs):
        parts = (torch.randperm(width, device=advantage.device).tensor_split(num_minibatches)
                 if num_minibatches > 1 else [slice(None)])
        for rows in parts:
            out = policy.analyze_sequence(
                batch[OBS][:steps, rows], batch[ACTION][:steps, rows], batch[HIDDEN][0, rows], batch[FIRST][:steps, rows]
            )
            out = {k: v[kept].flatten() for k, v in out.items()}
            old = (x[:, rows][kept].flatten() for x in (old_log_prob, old_value, advantage, returns))
            stats = apply_loss(out, *old)
            totals = stats if totals is None else totals + stats
    assert totals is not None  # epochs >= 1 and num_minibatches >= 1 (checked by the config)
    explained = explained_variance(old_value[kept].flatten(), returns[kept].flatten())
    return totals / (epochs * len(parts)), explained
