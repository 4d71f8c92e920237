"""Value decomposition by hand (srl.algos.mixers): VDN is a sum, QMIX is monotonic in every
agent's Q, and on the QMIX paper's state 2B (payoffs [[0, 1], [1, 8]], monotonic but not a sum)
QMIX learns every joint value where VDN cannot: VDN rates the best joint action well below 8, which
in the paper's two-step game makes it pick the other state's sure 7."""

from __future__ import annotations

import copy

import pytest
import torch

from srl.algos.mixers import QMixer, VDNMixer, td_loss

PAYOFF = torch.tensor([[0.0, 1.0], [1.0, 8.0]])  # Rashid et al. (2018), Table 1, state 2B


def test_vdn_sums_and_qmix_is_monotonic_in_every_agent():
    qs = torch.randn(64, 3)
    assert torch.allclose(VDNMixer()(qs), qs.sum(1))
    torch.manual_seed(0)
    mixer = QMixer(num_agents=3, state_dim=5)
    qs.requires_grad_(True)
    state = torch.randn(64, 5)
    (grad,) = torch.autograd.grad(mixer(qs, state).sum(), qs)
    assert (grad >= 0).all() and (grad > 0).any()
    with pytest.raises(ValueError, match="global state"):
        mixer(qs)
    with pytest.raises(ValueError, match="agents and a state"):
        QMixer(0, 5)


def test_td_loss_targets_each_agents_greedy_next_action_and_masks_the_illegal():
    mixer = VDNMixer()
    next_q = torch.tensor([[[1.0, 5.0], [2.0, 0.0]]])  # [B=1, agents=2, actions=2]
    loss, td = td_loss(mixer, mixer, torch.tensor([[1.0, 1.0]]), next_q, next_q,
                       reward=torch.tensor([1.0]), discount=torch.tensor([0.5]))
    assert td.item() == pytest.approx(abs(2.0 - (1.0 + 0.5 * (5.0 + 2.0))))  # greedy: 5 and 2
    mask = torch.tensor([[[1.0, 0.0], [1.0, 1.0]]])  # agent 0 may not take its action 1
    _, td = td_loss(mixer, mixer, torch.tensor([[1.0, 1.0]]), next_q, next_q, torch.tensor([1.0]),
                    torch.tensor([0.5]), next_mask=mask)
    assert td.item() == pytest.approx(abs(2.0 - (1.0 + 0.5 * (1.0 + 2.0))))
    assert loss.item() == pytest.approx(2.5**2)


def _train(mixer: torch.nn.Module, steps: int = 500) -> tuple[tuple[int, int], torch.Tensor]:
    """Both agents' Qs (one learnable vector each: one state) and the mixer trained on uniformly
    random joint actions of the one-step game; returns the greedy joint action and Q_tot table."""
    torch.manual_seed(0)
    n = PAYOFF.shape[0]
    agent_qs = torch.nn.Parameter(torch.zeros(2, n))
    state = torch.ones(64, 1)
    opt = torch.optim.Adam([agent_qs, *mixer.parameters()], lr=0.02)
    target = copy.deepcopy(mixer)
    nothing = torch.zeros(64, 2, n)  # one step: the next state is terminal (discount 0)
    for _ in range(steps):
        a = torch.randint(0, n, (64, 2))
        taken = torch.stack([agent_qs[0, a[:, 0]], agent_qs[1, a[:, 1]]], dim=1)
        loss, _ = td_loss(mixer, target, taken, nothing, nothing, PAYOFF[a[:, 0], a[:, 1]], torch.zeros(64),
                          state, state)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        grid = torch.cartesian_prod(torch.arange(n), torch.arange(n))
        table = mixer(torch.stack([agent_qs[0, grid[:, 0]], agent_qs[1, grid[:, 1]]], 1), state[: n * n])
        greedy = (int(agent_qs[0].argmax()), int(agent_qs[1].argmax()))
    return greedy, table.reshape(n, n)


def test_qmix_learns_a_monotonic_game_that_a_sum_cannot_hold():
    greedy, table = _train(QMixer(num_agents=2, state_dim=1, embed_dim=8, hypernet_hidden=16))
    assert greedy == (1, 1) and (table - PAYOFF).abs().max() < 0.5, table
    greedy, table = _train(VDNMixer())
    # the best additive fit of [[0, 1], [1, 8]] is [[-1.5, 2.5], [2.5, 6.5]]: off by 1.5 everywhere
    assert greedy == (1, 1) and table[1, 1] < 7, table
    assert (table - PAYOFF).abs().max() > 1.0, table
