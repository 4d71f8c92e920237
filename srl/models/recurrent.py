"""Recurrent policies: a tanh encoder and an LSTM or GRU core, under actor-critic or Q heads.

The state of the core travels outside the network, so that many environments share one policy:

- acting (`rollout_recurrent`): the caller passes each row's state and its `first` flag (the
  observation starts an episode, so the state is zeroed first); the policy returns the actions,
  the state that entered the step (column `hidden`, stored with every segment row) and the state
  for the next step. srl.workers.policy.Acting keeps the next states, per actor and ring split.
- training (`unroll`): the trainer re-runs the core over a [T, B] segment from the stored state at
  its row 0, zeroing it again wherever `first` is set, with the same ops as acting, so what it
  recomputes (log-probabilities, Q values) is what was acted with.

The LSTM state is (h, c) concatenated on the last axis; the GRU state is h.
"""

from __future__ import annotations

from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from srl.api.policy import FieldSpec, Policy
from srl.api.registry import register_policy
from srl.data import columns as C
from srl.models.heads import SPACES as CATEGORICAL_SPACES
from srl.models.heads import categorical_head
from srl.models.mlp import orthogonal

CELLS = ("lstm", "gru")


class RecurrentCore(Policy):
    """Encoder + core shared by the recurrent heads; Box observations, the heads' `action_spaces`."""

    recurrent = True  # srl.workers.policy.Acting keeps its state per env
    action_spaces: ClassVar[tuple[type[gym.Space], ...]] = (gym.spaces.Discrete,)  # a head may widen it
    name = "recurrent policy"

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, cell: str = "lstm",
                 hidden: int = 64) -> None:
        super().__init__(observation_space, action_space)
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(f"{self.name} needs a Box observation space, got {observation_space}")
        if not isinstance(action_space, self.action_spaces):
            names = " or ".join(s.__name__ for s in self.action_spaces)
            raise TypeError(f"{self.name} needs a {names} action space, got {action_space}")
        if cell not in CELLS:
            raise ValueError(f"policy_kwargs.cell must be one of {list(CELLS)}, got {cell!r}")
        if int(hidden) <= 0:
            raise ValueError(f"policy_kwargs.hidden must be a positive number of units, got {hidden!r}")
        self.cell, self.hidden = cell, int(hidden)
        self.obs_dim = int(np.prod(observation_space.shape))
        if isinstance(action_space, gym.spaces.Discrete):  # the Q head's actions
            self.action_start, self.num_actions = int(action_space.start), int(action_space.n)
        self.encoder = orthogonal(nn.Linear(self.obs_dim, self.hidden))
        self.core = nn.LSTMCell(self.hidden, self.hidden) if cell == "lstm" else nn.GRUCell(self.hidden, self.hidden)
        self.state_size = 2 * self.hidden if cell == "lstm" else self.hidden
        self._solo_state: torch.Tensor | None = None  # for stateless callers of `rollout`
        self._solo_first: torch.Tensor | None = None

    def input_fields(self) -> dict[str, FieldSpec]:
        return {C.FIRST: FieldSpec((), np.bool_)}

    def initial_state(self, rows: int) -> torch.Tensor:
        return torch.zeros(rows, self.state_size)

    def rollout_recurrent(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor,
                          deterministic: bool = False) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """obs [B, ...], state [B, S], first [B] -> (outputs incl. "hidden" = the state used, next state)."""
        state = _reset(state, first)
        y, next_state = self._step(self._encode(obs), state)
        return {**self.act(y, deterministic), C.HIDDEN: state}, next_state

    def act(self, y: torch.Tensor, deterministic: bool) -> dict[str, torch.Tensor]:
        """The head's outputs (action, ...) from the core's output y [B, H]."""
        raise NotImplementedError

    def rollout(self, obs: torch.Tensor, deterministic: bool = False) -> dict[str, torch.Tensor]:
        """For callers that keep no state (evaluation): one stream of rows, state kept here;
        `episodes_ended(done)` after each env step says which rows start over."""
        rows = obs.shape[0]
        if self._solo_state is None or self._solo_first is None or self._solo_state.shape[0] != rows:
            self._solo_state, self._solo_first = self.initial_state(rows), torch.ones(rows, dtype=torch.bool)
        out, self._solo_state = self.rollout_recurrent(obs, self._solo_state, self._solo_first, deterministic)
        self._solo_first = torch.zeros(rows, dtype=torch.bool)
        return out

    def episodes_ended(self, done: np.ndarray) -> None:
        if self._solo_first is not None:
            self._solo_first = torch.as_tensor(np.asarray(done, bool).reshape(-1))

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        raise TypeError(f"{self.name} is trained through time (unroll), not one step at a time")

    def unroll(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """obs [T, B, ...], state [B, S] entering step 0, first [T, B] -> core outputs [T, B, H]."""
        steps, rows = obs.shape[:2]
        x = self._encode(obs.reshape(steps * rows, *obs.shape[2:])).view(steps, rows, self.hidden)
        keep = (~first.bool()).unsqueeze(-1).to(x.dtype)  # [T, B, 1]: 0 where an episode starts
        ys = []
        if self.cell == "lstm":  # h and c kept apart inside the loop: no cat/split per step
            h, c = state[:, : self.hidden], state[:, self.hidden :]
            for t in range(steps):
                h, c = self.core(x[t], (h * keep[t], c * keep[t]))
                ys.append(h)
        else:
            h = state
            for t in range(steps):
                h = self.core(x[t], h * keep[t])
                ys.append(h)
        return torch.stack(ys)

    def _encode(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.reshape(obs.shape[0], self.obs_dim)
        return torch.tanh(self.encoder(x if x.dtype == torch.float32 else x.float()))

    def _step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One step: (output [B, H], next state [B, S])."""
        if self.cell == "lstm":
            h, c = self.core(x, (state[:, : self.hidden], state[:, self.hidden :]))
            return h, torch.cat([h, c], dim=-1)
        h = self.core(x, state)
        return h, h


class RecurrentActorCritic(RecurrentCore):
    """Categorical actor (one categorical per action entry, srl.models.heads) and a value critic
    over the core (PPO)."""

    name = "recurrent-actor-critic"
    kind = "actor-critic"  # trained through time: analyze_sequence
    action_spaces = CATEGORICAL_SPACES

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, cell: str = "lstm",
                 hidden: int = 64) -> None:
        super().__init__(observation_space, action_space, cell, hidden)
        self.dist = categorical_head(action_space)
        self.actor_head = orthogonal(nn.Linear(self.hidden, self.dist.logits_dim), 0.01)
        # The critic reads the core's output through its own layer, with the gradient stopped:
        # the value loss is in return units (tens on CartPole) and, through a shared core, would
        # swamp the policy gradient (measured: no learning at all with the critic on the core).
        self.critic_head = nn.Sequential(nn.Linear(self.hidden, self.hidden), nn.Tanh(), nn.Linear(self.hidden, 1))

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {
            C.LOG_PROB: FieldSpec((), np.float32),
            C.VALUE: FieldSpec((), np.float32),
            C.HIDDEN: FieldSpec((self.state_size,), np.float32),
        }

    def act(self, y: torch.Tensor, deterministic: bool) -> dict[str, torch.Tensor]:
        action, log_prob = self.dist.act(self.actor_head(y), deterministic)
        return {C.ACTION: action, C.LOG_PROB: log_prob, C.VALUE: self.critic_head(y.detach()).squeeze(-1)}

    def analyze_sequence(self, obs: torch.Tensor, action: torch.Tensor, state: torch.Tensor,
                         first: torch.Tensor) -> dict[str, torch.Tensor]:
        """obs [T, B, ...], action [T, B, *action shape], state [B, S] entering step 0, first [T, B] ->
        {"log_prob", "entropy", "value"}, each [T, B], differentiable."""
        y = self.unroll(obs, state, first)
        log_prob, entropy = self.dist.evaluate(self.actor_head(y), action)
        return {C.LOG_PROB: log_prob, "entropy": entropy, C.VALUE: self.critic_head(y.detach()).squeeze(-1)}


class RecurrentQ(RecurrentCore):
    """Q values over the core (R2D2); acts greedily, exploration is added where actions are chosen."""

    name = "recurrent-q"
    kind = "q-network"  # trained through time: q_sequence

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, cell: str = "lstm",
                 hidden: int = 64) -> None:
        super().__init__(observation_space, action_space, cell, hidden)
        self.q_head = nn.Sequential(nn.Linear(self.hidden, self.hidden), nn.ReLU(), nn.Linear(self.hidden, self.num_actions))

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {C.HIDDEN: FieldSpec((self.state_size,), np.float32)}

    def act(self, y: torch.Tensor, deterministic: bool) -> dict[str, torch.Tensor]:
        return {C.ACTION: self.q_head(y).argmax(dim=-1) + self.action_start}

    def q_sequence(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
        """obs [T, B, ...], state [B, S], first [T, B] -> Q [T, B, actions]."""
        return self.q_head(self.unroll(obs, state, first))


def _reset(state: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """Zero the rows whose episode starts here."""
    return state * (~first.bool()).unsqueeze(-1).to(state.dtype)


register_policy("recurrent-actor-critic")(RecurrentActorCritic)
register_policy("recurrent-q")(RecurrentQ)
