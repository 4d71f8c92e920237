"""The opponents of a self-play league as one policy that only acts ("league-pool").

It plays the snapshots in a league's pool (srl.population.league, kept by the controller:
srl.population.keeper): each row's opponent is drawn from the pool when its episode starts and
kept until it ends. That per-row choice is its recurrent state, one float per row: the snapshot's
version (-1 before the pool has one: a random legal move). The state entering a step is recorded
as its "hidden" output, so the actor can tell whose episode ended (`episode_tag`) and report each
game's result against that snapshot.

The league comes over the league's streams (srl.population.league_streams, polled by the worker
as a policy's parameters are): `take_table` (league.json's content: the pool and its records steer
the draws) and `take_snapshot` (a snapshot's weights, loaded into a network made as `policy` with
`policy_kwargs`, the learner's); `missing` names the pooled snapshots it lacks, which its worker
asks for. The league's scripted opponents (`scripted`, registered scripted policies) play under
their negative tags; each is built once here, so one that cannot play this game fails before
launch. It keeps the pool's networks, and those a row still plays.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl.api import registry
from srl.api.policy import FieldSpec, Policy
from srl.data import columns as C
from srl.envs.central_state import AgentStateBox
from srl.evaluation.opponents import load_network
from srl.models.scripted import random_legal
from srl.population.league import FILE, League
from srl.streams.params import load_frames

NONE = -1.0  # the state of a row whose opponent is no snapshot (an empty pool)


@registry.register_policy("league-pool")
class LeaguePool(Policy):
    kind = "scripted"  # it never trains (a policy of a lane with trainable: false)
    action_spaces = (gym.spaces.Discrete,)  # a game's moves (a random legal one before the first snapshot)
    recurrent = True
    episode_tag = C.HIDDEN  # its state entering a step names the opponent

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, policy: str = "mappo",
                 policy_kwargs: dict[str, Any] | None = None, scripted: tuple[str, ...] = (),
                 seed: int | None = None) -> None:
        super().__init__(observation_space, action_space)
        self.make = lambda: registry.policies.get(policy)(observation_space, action_space, **(policy_kwargs or {}))
        self.make()  # a learner's network must fit these spaces: fail now, not at the first snapshot
        self.state_size = 1
        self.rng = np.random.default_rng(int(torch.randint(0, 2**62, (1,))) if seed is None else seed)
        self.scripted = {name: registry.policies.get(name)(observation_space, action_space,
                                                           seed=int(self.rng.integers(2**62))) for name in scripted}
        self.nets: dict[int, Policy] = {}  # version -> its frozen network
        self.league = League()
        self.rows_play: set[int] = set()  # the versions rows played at the last step
        # a turn-based game's rows hold the mover's action mask
        self._turns = observation_space if isinstance(observation_space, AgentStateBox) and observation_space.mask_dim else None

    def rollout_fields(self) -> dict[str, FieldSpec]:
        return {C.HIDDEN: FieldSpec((1,), np.float32)}

    def input_fields(self) -> dict[str, FieldSpec]:
        return {C.FIRST: FieldSpec((), np.bool_)}

    def initial_state(self, rows: int) -> torch.Tensor:
        return torch.full((rows, 1), NONE)

    def rollout_recurrent(self, obs: torch.Tensor, state: torch.Tensor, first: torch.Tensor,
                          deterministic: bool = False) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        state = state.clone()
        for row in torch.nonzero(first.bool()).flatten().tolist():
            drawn = self.league.draw()
            state[row, 0] = NONE if drawn is None else float(self.league.snapshots[drawn].version)
        action = torch.zeros(len(obs), dtype=torch.int64)
        self.rows_play = {int(v) for v in torch.unique(state[:, 0]).tolist()}
        for version in torch.unique(state[:, 0]).tolist():
            rows = state[:, 0] == version
            net = self._net(int(version))
            if net is None:
                action[rows] = self._random(obs[rows])
            else:
                action[rows] = net.rollout(obs[rows], deterministic)["action"].to(torch.int64)
        return {"action": action, C.HIDDEN: state}, state

    def rollout(self, obs: Any, deterministic: bool = False) -> dict[str, torch.Tensor]:
        rows = len(obs)
        out, _ = self.rollout_recurrent(obs, self.initial_state(rows), torch.ones(rows, dtype=torch.bool), deterministic)
        return out

    def analyze(self, obs: torch.Tensor, action: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError("league-pool only acts: it does not train")

    def _random(self, obs: torch.Tensor) -> torch.Tensor:
        if self._turns is None:
            return torch.as_tensor(np.array([self.action_space.sample() for _ in range(len(obs))]), dtype=torch.int64)
        masks = self._turns.action_mask(obs).cpu().numpy()
        return torch.from_numpy(random_legal(masks, self.rng).astype(np.int64))

    def _net(self, version: int) -> Policy | None:
        """A snapshot's network (None while it has not come: its rows play random legal moves),
        or a scripted opponent."""
        name = self.league.named(version)
        snap = None if name is None else self.league.snapshots[name]
        if snap is not None and snap.scripted:
            return self.scripted.get(snap.scripted)
        return self.nets.get(version)

    # -- the league, as its streams bring it (srl.population.league_streams) ---------------------

    def take_table(self, table: dict[str, Any]) -> None:
        """league.json's content: the pool and its records (a table that is no league is ignored)."""
        try:
            self.league = League.from_json(table, seed=int(self.rng.integers(2**31)))
        except ValueError:
            return
        keep = self._pooled() | self.rows_play  # a row still playing one that left the pool plays on
        self.nets = {v: net for v, net in self.nets.items() if v in keep}  # memory stays bounded

    def take_snapshot(self, version: int, frames: Any) -> None:
        """Snapshot `version`'s weights, the learner's tensors in state_dict order."""
        if version in self.nets or version not in self._pooled() | self.rows_play:
            return
        net = self.make()
        load_frames(net, frames)
        self.nets[version] = net.eval()

    def missing(self) -> list[int]:
        """The pooled snapshots whose weights it has not got."""
        return sorted(self._pooled() - set(self.nets))

    def load_run(self, run_dir: Path) -> None:
        """The league as a run left it, from its own files (`srl eval` of a league run, offline):
        league.json and the pooled snapshots' checkpoints in `run_dir`."""
        self.take_table(League.load(Path(run_dir) / FILE).to_json())
        for version in self.missing():
            snap = self.league.snapshots[str(self.league.named(version))]
            self.nets[version] = load_network(self.make, Path(run_dir) / snap.checkpoint)

    def _pooled(self) -> set[int]:
        league = self.league
        return {league.snapshots[n].version for n in league.pool if not league.snapshots[n].scripted}
