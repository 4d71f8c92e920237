"""Replay of whole teams, for value decomposition (VDN, QMIX: srl.algos.qmix).

A feed-forward replay stores one n-step transition per row (srl.data.replay): one agent of one
env. A team's TD target is the team's, so a team replay stores one transition per env and step
holding every agent of that env (rows are env-major: row = env * agents + agent):

    obs, next_obs  [agents, ...]   each agent's observation (its rows carry the global state)
    action         [agents, ...]   each agent's action
    reward         the team's n-step return of the summed rewards of its agents
    discount       gamma^m, or 0 where the env's episode terminated within the m steps

An env's episode is over on the step every row of it is done (srl.envs.vector marks them all);
it terminated (no bootstrap) unless one of its agents was cut off by truncation.
"""

from __future__ import annotations

import numpy as np

from srl.api.policy import FieldSpec
from srl.data import columns as C
from srl.data.nstep import nstep_returns
from srl.data.replay import Transitions, step_transitions, transition_fields


def team_fields(obs: FieldSpec, action: FieldSpec, agents: int) -> dict[str, FieldSpec]:
    """What the memory stores per team transition."""
    return transition_fields(FieldSpec((agents, *obs.shape), obs.dtype), FieldSpec((agents, *action.shape), action.dtype))


def team_transitions(segment: dict[str, np.ndarray], gamma: float, n: int, agents: int) -> Transitions:
    """The T * envs team transitions of a [T + 1, envs * agents, ...] segment, step-major."""
    steps, rows = segment[C.REWARD].shape
    if rows % agents:
        raise ValueError(f"a segment of {rows} rows does not hold whole teams of {agents} agents")
    envs = rows // agents

    def teams(x: np.ndarray) -> np.ndarray:  # [T + 1, rows, ...] -> [T + 1, envs, agents, ...]
        return x.reshape(steps, envs, agents, *x.shape[2:])

    terminated, truncated = teams(segment[C.TERMINATED]), teams(segment[C.TRUNCATED])
    over = (terminated | truncated).all(axis=2)
    cut_off = truncated.any(axis=2)
    nstep = nstep_returns(teams(segment[C.REWARD]).sum(axis=2), over & ~cut_off, over & cut_off, gamma, n)
    return step_transitions(teams(segment[C.OBS]), teams(segment[C.ACTION]), *nstep)
