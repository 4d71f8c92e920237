"""V-trace off-policy targets (Espeholt et al., 2018, IMPALA) over [T + 1, B] segments.

For a segment acted by a behaviour policy mu and a target (learner) policy pi, with
rho_t = min(rho_bar, pi(a_t|x_t) / mu(a_t|x_t)) and c_i = lam * min(c_bar, pi(a_i|x_i) / mu(a_i|x_i)):

    delta_t = rho_t * (r_t + gamma * V(x_{t+1}) - V(x_t))
    v_s     = V(x_s) + sum_{t >= s} gamma^(t - s) * (c_s ... c_{t-1}) * delta_t
    A_s     = rho_s * (r_s + gamma * v_{s+1} - V(x_s))          (policy-gradient advantage)

computed backwards as v_s - V(x_s) = delta_s + gamma * c_s * (v_{s+1} - V(x_{s+1})), with
v_T = V(x_T) at the segment's end. Episode ends are handled as in `srl.algos.gae`:

* terminated on t -> t + 1: nothing is bootstrapped (gamma_t = 0) and the trace is cut;
* truncated (and not terminated): the next row already belongs to the next episode, so
  V(s_final) is approximated by V(x_t): the reward becomes r_t + gamma * V(x_t), then the trace
  is cut like on termination.

With pi = mu and rho_bar, c_bar >= 1, v_s is the lambda-return and A_s the GAE(lam = 1)-style
one-step advantage on it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class VTrace(NamedTuple):
    vs: torch.Tensor  # [T, B] value targets v_s
    pg_advantage: torch.Tensor  # [T, B] rho_s * (q_s - V(x_s)), the IMPALA policy-gradient weight
    q: torch.Tensor  # [T, B] r_s + gamma * v_{s+1} (episode ends applied): the one-step target
    rho: torch.Tensor  # [T, B] the clipped importance weights min(rho_bar, pi / mu)


def compute_vtrace(
    log_rho: torch.Tensor,
    reward: torch.Tensor,
    value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    rho_bar: float | None = 1.0,
    c_bar: float | None = 1.0,
    lam: float = 1.0,
) -> VTrace:
    """V-trace targets of a batch of segments; no gradients flow through the result.

    `log_rho` = log pi(a_t|x_t) - log mu(a_t|x_t), shaped [T, B] or [T + 1, B] (row T ignored);
    reward / terminated / truncated / value are [T + 1, B] as in `srl.api.algorithm`, `value`
    holding the *learner's* estimates V(x_0) .. V(x_T). rho_bar / c_bar None = no clipping.
    """
    if value.dim() < 1 or value.shape[0] < 2:
        raise ValueError(f"value must be shaped [T + 1, ...] with T >= 1, got {tuple(value.shape)}")
    steps = value.shape[0] - 1
    if log_rho.shape[0] not in (steps, steps + 1):
        raise ValueError(f"log_rho has {log_rho.shape[0]} rows, expected T={steps} or T + 1")
    if rho_bar is not None and rho_bar <= 0 or c_bar is not None and c_bar <= 0:
        raise ValueError(f"rho_bar and c_bar must be > 0 or None, got {rho_bar}, {c_bar}")
    with torch.no_grad():
        value = value.detach().float()
        ratio = log_rho[:steps].detach().float().exp()
        rho = ratio.clamp(max=rho_bar) if rho_bar is not None else ratio
        c = lam * (ratio.clamp(max=c_bar) if c_bar is not None else ratio)

        terminated = terminated[:steps].bool()
        truncated = truncated[:steps].bool()
        current = value[:steps]
        reward = reward[:steps].float() + gamma * current * (truncated & ~terminated).float()
        discount = gamma * (~(terminated | truncated)).float()

        delta = rho * (reward + discount * value[1:] - current)
        decay = discount * c
        vs_minus_v = delta.clone()  # the last row has nothing after it
        for t in range(steps - 2, -1, -1):
            torch.addcmul(delta[t], decay[t], vs_minus_v[t + 1], out=vs_minus_v[t])
        vs = vs_minus_v + current
        next_vs = torch.cat([vs[1:], value[steps:]])  # v_{s+1}; v_T = V(x_T)
        q = reward + discount * next_vs
        return VTrace(vs, rho * (q - current), q, rho)
