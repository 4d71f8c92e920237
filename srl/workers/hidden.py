"""Recurrent state of every env a policy acts for, kept where the acting happens.

A policy worker answers many actors, each with a ring of groups: the state of group (actor,
split) is one [rows, state size] array here, zero until its first request. Episode starts are
reset by the policy itself (the actor's `first` flags), so this store only gathers the states of
one batch of requests and scatters the next states back. A restarted policy worker starts from
zero states; the stored `hidden` column records what was used, so training stays consistent.
"""

from __future__ import annotations

import numpy as np

Key = tuple[int, int]  # (actor, ring split)


class HiddenStates:
    def __init__(self, state_size: int) -> None:
        self.state_size = state_size
        self.states: dict[Key, np.ndarray] = {}

    def gather(self, keys: list[Key], rows: list[int]) -> np.ndarray:
        """The states of these groups, concatenated in order: [sum(rows), state size]."""
        parts = [self._of(key, n) for key, n in zip(keys, rows)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def scatter(self, keys: list[Key], rows: list[int], next_states: np.ndarray) -> None:
        """Keep each group's slice of `next_states` (rows in the order of `gather`)."""
        start = 0
        for key, n in zip(keys, rows):
            self.states[key] = next_states[start : start + n].copy()
            start += n

    def _of(self, key: Key, rows: int) -> np.ndarray:
        state = self.states.get(key)
        if state is None or state.shape[0] != rows:
            state = self.states[key] = np.zeros((rows, self.state_size), np.float32)
        return state
