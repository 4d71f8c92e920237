"""The step `GymVectorEnv` calls per env: past the wrappers that have become pure pass-throughs.

`gymnasium.make` wraps an env as TimeLimit(OrderEnforcing(PassiveEnvChecker(env))) (the
checker only where it is enabled). Each layer costs a Python call on every step, about a tenth
of CartPole's own step. Two of them do nothing on a step once a condition holds, and that
condition never becomes false again:

* OrderEnforcing raises ResetNeeded if step comes before the first reset; once reset
  (`_has_reset`, never cleared) its step only calls the env below.
* PassiveEnvChecker checks the first step's result and compares the first two steps' data
  (`checked_step`, `checked_data_reuse`, never cleared); after that its step only calls the
  env below.

Those layers are skipped only in that state, and only when their type is exactly gymnasium's
(a subclass may add work). TimeLimit is not a pass-through: its work (count the episode's
steps, set truncated at the limit) is done on the wrapper's own counter by `GymVectorEnv`,
exactly as `TimeLimit.step` does it, so `TimeLimit.reset` (called through the whole chain on
every reset) still zeroes it. Any other wrapper ends the walk: its step is called as is.
Resets always go through the whole chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit


class Stepper(NamedTuple):
    step: Callable[[Any], tuple]  # the first layer that must run
    time_limit: TimeLimit | None  # a TimeLimit above `step` whose counting the caller does
    settled: bool  # False: a layer may become skippable later (not reset yet, checks pending)


def _passes_through(layer: gym.Env) -> bool | None:
    """True: a pass-through now (skip it); False: not yet; None: never (a layer that works)."""
    if type(layer) is OrderEnforcing:
        return layer._has_reset
    if type(layer) is PassiveEnvChecker:
        return layer.checked_step and layer.checked_data_reuse
    return None


def stepper(env: gym.Env) -> Stepper:
    """Where a step of `env` has to start, with the TimeLimit to count for it (see module doc)."""
    layer, time_limit = env, None
    while True:
        if type(layer) is TimeLimit and time_limit is None:
            time_limit, layer = layer, layer.env
            continue
        skip = _passes_through(layer)
        if not skip:
            return Stepper(layer.step, time_limit, settled=skip is None)
        assert isinstance(layer, gym.Wrapper)  # the layers that pass through are wrappers
        layer = layer.env
