"""Two sides that change seats every episode, for two-player games played by two policies.

With a policy per agent (config `policies`), a game's agents are its seats: player_1 always moves
first, so a policy mapped to it never learns to play second. `AlternatingSeats` renames the seats
to two sides (say "learner" and "opponent") and swaps them at every reset: side 0 takes seat 0 in
one episode and seat 1 in the next, and half of a run's envs start swapped (by env id), so each
side plays each seat about as often. Observations, rewards and done flags come back under the
sides' names; actions go to the seats they sit in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from srl.api.env import Environment, EnvStep


class AlternatingSeats(Environment):
    def __init__(self, env: Environment, sides: Sequence[str], env_id: int = 0) -> None:
        if len(env.agents) != 2 or len(sides) != 2 or sides[0] == sides[1]:
            raise ValueError(f"alternating seats need a two-player game and two side names, got agents "
                             f"{list(env.agents)} and sides {list(sides)}")
        seats = tuple(env.agents)
        if env.observation_spaces[seats[0]] != env.observation_spaces[seats[1]] or \
                env.action_spaces[seats[0]] != env.action_spaces[seats[1]]:
            raise ValueError(f"alternating seats need seats of one observation and action space; {seats[0]} and "
                             f"{seats[1]} differ")
        self.env, self.seats, self.agents = env, seats, tuple(sides)
        self.observation_spaces = {side: env.observation_spaces[seats[0]] for side in sides}
        self.action_spaces = {side: env.action_spaces[seats[0]] for side in sides}
        self._swapped = env_id % 2 == 0  # flipped at the first reset: odd env ids start swapped
        # a turn-based game's rows end with the mover's action mask (srl.envs.central_state reads its size)
        self.action_mask_dim = int(getattr(env, "action_mask_dim", 0))
        self.seat_of: dict[str, str] = {}

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        self._swapped = not self._swapped
        order = self.seats[::-1] if self._swapped else self.seats
        self.seat_of = dict(zip(self.agents, order))
        obs = self.env.reset(seed=seed)
        return {side: obs[seat] for side, seat in self.seat_of.items()}

    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        st = self.env.step({seat: actions[side] for side, seat in self.seat_of.items()})
        return EnvStep(self._sides(st.obs), self._sides(st.reward), self._sides(st.terminated),
                       self._sides(st.truncated), self._sides(st.info))

    def _sides(self, by_seat: Mapping[str, Any]) -> dict[str, Any]:
        return {side: by_seat[seat] for side, seat in self.seat_of.items() if seat in by_seat}

    def close(self) -> None:
        self.env.close()
