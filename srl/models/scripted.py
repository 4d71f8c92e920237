"""Scripted opponents for turn-based games: uniformly random legal moves, and connect four's
one-step lookahead (win if it can, block if it must, else a random legal move).

Both read rows of the `pettingzoo-aec` env (srl.envs.pettingzoo_aec through
srl.envs.central_state): the row's own part is the game's observation followed by the action mask
of the player to move (all zeros while waiting). Connect four's observation is the 6x7 board in two
planes, the mover's pieces then the other player's, row 5 at the bottom (PettingZoo's layout).
They have no parameters and never train; `srl eval --against` and the league play them.
"""

from __future__ import annotations

from typing import TypeGuard

import gymnasium as gym
import numpy as np
import torch

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.envs.central_state import AgentStateBox

ROWS, COLS = 6, 7
LINES = ((0, 1), (1, 0), (1, 1), (1, -1))  # the four directions a line of four can run


def random_legal(masks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One uniformly random allowed action per row of masks [rows, actions] (0 where none)."""
    noise = rng.random(masks.shape) * (masks > 0.5)
    return noise.argmax(axis=1)


def landing_row(board: np.ndarray, col: int) -> int:
    """The row a piece dropped in `col` of one board [6, 7, 2] comes to rest in (-1: full)."""
    empty = np.flatnonzero(board[:, col].sum(axis=1) == 0)
    return int(empty[-1]) if len(empty) else -1


def makes_four(plane: np.ndarray, row: int, col: int) -> bool:
    """Whether a piece at (row, col) on `plane` [6, 7] (the player's pieces) completes four in a line."""
    for dr, dc in LINES:
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLS and plane[r, c]:
                run, r, c = run + 1, r + sign * dr, c + sign * dc
        if run >= 4:
            return True
    return False


def lookahead_move(board: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
    """Connect four, one board [6, 7, 2] from the mover's side: a winning column if there is one,
    else one that blocks the other player's win, else a random legal one."""
    legal = [c for c in range(COLS) if mask[c] > 0.5]
    for plane in (0, 1):  # first our own win, then their threat
        for col in legal:
            row = landing_row(board, col)
            if row >= 0 and makes_four(board[:, :, plane], row, col):
                return col
    return int(rng.choice(legal)) if legal else 0


class ScriptedPolicy(Policy):
    """A fixed player over a turn-based game's rows; no parameters, nothing to train."""

    kind = "scripted"
    action_spaces = (gym.spaces.Discrete,)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, seed: int | None = None) -> None:
        super().__init__(observation_space, action_space)
        if not isinstance(observation_space, AgentStateBox) or not observation_space.mask_dim:
            raise TypeError(f"{type(self).__name__} plays turn-based 'pettingzoo-aec' games; got {observation_space}")
        self.space = observation_space
        self.own_dim, self.mask_dim = observation_space.own_dim, observation_space.mask_dim
        # seeded from torch's generator unless given, so a run's seed fixes its moves
        self.rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,))) if seed is None else seed)

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {}

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        rows = obs.detach().cpu().numpy()
        own, masks = rows[:, : self.own_dim - self.mask_dim], self.space.action_mask(rows)
        return {"action": torch.from_numpy(self.moves(own, masks).astype(np.int64))}

    def moves(self, own: np.ndarray, masks: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} is scripted: it does not train")


def scripted_names() -> list[str]:
    """The registered scripted players (ScriptedPolicy classes): what `--against` and a league's
    `scripted` take."""
    from srl.api import registry

    return [n for n in registry.policies.names() if is_scripted(registry.policies.get(n))]


def is_scripted(factory: object) -> TypeGuard[type[ScriptedPolicy]]:
    """Whether a registered policy factory is a ScriptedPolicy class."""
    return isinstance(factory, type) and issubclass(factory, ScriptedPolicy)


@register_policy("random-legal")
class RandomLegal(ScriptedPolicy):
    """A uniformly random legal move."""

    def moves(self, own: np.ndarray, masks: np.ndarray) -> np.ndarray:
        return random_legal(masks, self.rng)


@register_policy("connect4-lookahead")
class Connect4Lookahead(ScriptedPolicy):
    """Connect four: win if it can, block if it must, else a random legal move."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, seed: int | None = None) -> None:
        super().__init__(observation_space, action_space, seed)
        if self.own_dim - self.mask_dim != ROWS * COLS * 2 or self.mask_dim != COLS:
            raise TypeError(f"connect4-lookahead reads connect four's 6x7x2 board; got {observation_space}")

    def moves(self, own: np.ndarray, masks: np.ndarray) -> np.ndarray:
        boards = own.reshape(-1, ROWS, COLS, 2)
        return np.array([lookahead_move(b, m, self.rng) if m.any() else 0 for b, m in zip(boards, masks)])
