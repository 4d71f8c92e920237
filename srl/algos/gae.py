"""Generalized advantage estimation (Schulman et al., 2016) over [T + 1, B] segments."""

from __future__ import annotations

import torch


def compute_gae(
    reward: torch.Tensor,
    value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
    active: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets of a batch of segments.

    Inputs are shaped [T + 1, B] as in `srl.api.algorithm`: row t of reward / terminated /
    truncated describes the transition t -> t + 1 (row T is ignored), `value` holds the acting
    policy's estimates V(s_0) .. V(s_T). Returns (advantage, return), each [T, B] float, with
    return = advantage + value[:T] (the value-function target).

        delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t)
        A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}

    with done_t = terminated_t or truncated_t:

    * terminated: the episode ended; nothing is bootstrapped and the trace is cut.
    * truncated (and not terminated): the episode was cut off by a time limit, so the true
      target would bootstrap from V(s_final). The actor auto-resets on the same step, so row
      t + 1 already holds the *next* episode's first observation and s_final is not stored.
      We approximate V(s_final) by V(s_t), the value of the last observed state: the reward is
      augmented to r_t + gamma * V(s_t), and the trace is cut like on termination. The error is
      gamma * (V(s_final) - V(s_t)), small when one step changes the state little.

    Turn-based games: `active` [T + 1, B] (srl.data.columns.ACTIVE) is 1 where the row's agent
    acts on s_t and 0 where it waits. A waiting state is not a decision, so the transition into
    it is neither discounted nor bootstrapped (gamma and lam are 1 for t -> t + 1 when s_{t+1}
    waits): the rewards a waiting agent receives are credited, undiscounted, to its last action,
    and gamma counts the agent's own turns. With lam = 0 and V = 0 an acting step's advantage is
    exactly the sum of the rewards until the agent's next turn (tests/test_turns.py).
    """
    if value.dim() < 1 or value.shape[0] < 2:
        raise ValueError(f"value must be shaped [T + 1, ...] with T >= 1, got {tuple(value.shape)}")
    steps = value.shape[0] - 1
    value = value.float()
    terminated = terminated[:steps].bool()
    truncated = truncated[:steps].bool()
    current = value[:steps]

    bootstrap_last = (truncated & ~terminated).float()
    reward = reward[:steps].float() + gamma * current * bootstrap_last
    not_done = (~(terminated | truncated)).float()

    if active is None:
        delta = reward + gamma * value[1:] * not_done - current
        decay = (gamma * lam) * not_done
    else:  # per-step gamma and lambda: 1 into a waiting state
        next_acts = active[1 : steps + 1].float()
        step_gamma = 1.0 + (gamma - 1.0) * next_acts
        delta = reward + step_gamma * value[1:] * not_done - current
        decay = step_gamma * (1.0 + (lam - 1.0) * next_acts) * not_done
    advantage = delta.clone()  # the last row has nothing after it: A_{T-1} = delta_{T-1}
    for t in range(steps - 2, -1, -1):
        torch.addcmul(delta[t], decay[t], advantage[t + 1], out=advantage[t])
    return advantage, advantage + current
