"""Which policy acts, and why: `policy: auto` (the default) chosen by the observation and algorithm.

`choose_policy` is the one place that decides; `srl graph`, `srl show`, the run's first console
line and its config.yaml (where `auto` is written as the policy it became) all report its answer,
so a run never trains a policy nobody named without saying so (issue 37: an image Box trained an
MLP over 12,288 flattened pixels, silently).

For the algorithms that train an actor-critic (ppo, appo, impala):
- an image (srl.images.is_image: a Box of 2 or 3 dims carried as uint8) -> actor-critic-cnn, the
  Nature trunk, for Discrete actions and sides of at least 36; otherwise multi-input, whose image
  encoder has small 3x3 convolutions under 36x36 (MinAtar's 10x10, MiniGrid's 7x7) and takes
  every action space;
- a Dict, Tuple, Discrete, MultiDiscrete or MultiBinary observation -> multi-input;
- any other Box (a vector, a float image) -> actor-critic-mlp.
Other algorithms have no CNN policy. Those that declare a default policy (dqn's q-mlp, sac's
squashed-gaussian-mlp, r2d2's recurrent-q: Algorithm.default_policy) get it before this is asked
(srl.config.checks.algorithm_defaults); for the rest `auto` is actor-critic-mlp, as the old default was,
and the refusal names the policies that fit.

A policy named in the config acts as named, except that `actor-critic-mlp`, which reads one Box,
becomes multi-input for any other observation (as it always has: runs saved with it resume).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym

from srl import images
from srl.api import registry
from srl.config import ExperimentConfig

AUTO = "auto"
MLP, CNN, MULTI = "actor-critic-mlp", "actor-critic-cnn", "multi-input"


@dataclass(frozen=True)
class PolicyChoice:
    name: str  # the registered policy that acts
    why: str  # one clause: what chose it

    def line(self) -> str:
        return f"policy: {self.name} ({self.why})"


def choose_policy(config: ExperimentConfig, observation_space: gym.Space,
                  action_space: gym.Space | None = None) -> PolicyChoice:
    """The policy that acts for `config` in these spaces (see the module's docstring)."""
    return choose_by_names(config.policy, config.algorithm, observation_space, action_space)


def choose_by_names(policy: str, algorithm: str, observation_space: gym.Space,
                    action_space: gym.Space | None = None) -> PolicyChoice:
    """`choose_policy` for a policy and algorithm given by name (a pod built by srl.workers.pod.make_pod)."""
    if policy != AUTO:
        if policy == MLP and not isinstance(observation_space, gym.spaces.Box):
            return PolicyChoice(MULTI, f"policy={MLP} reads one Box; multi-input acts in its place for "
                                       f"the {_kind(observation_space)} observation")
        if policy == _algorithm_default(algorithm):  # algorithm=dqn alone brings q-mlp (srl.config.checks.algorithm_defaults)
            note = f"; algorithm {algorithm} has no CNN policy" if images.is_image(observation_space) else ""
            return PolicyChoice(policy, f"policy={policy}, algorithm {algorithm}'s own{note}")
        return PolicyChoice(policy, f"policy={policy} as given")
    if not trains_actor_critic(algorithm):
        note = f"; algorithm {algorithm} has no CNN policy" if images.is_image(observation_space) else ""
        return PolicyChoice(MLP, f"policy=auto: algorithm {algorithm} has no default of its own{note}")
    if images.is_image(observation_space):
        return _image_policy(observation_space, action_space)
    if not isinstance(observation_space, gym.spaces.Box):
        return PolicyChoice(MULTI, f"policy=auto: {_kind(observation_space)} observation, one encoder per key")
    space = observation_space
    return PolicyChoice(MLP, f"policy=auto: vector observation of shape {tuple(space.shape)}, {space.dtype}")


def _image_policy(space: gym.spaces.Box, action_space: gym.Space | None) -> PolicyChoice:
    layout = images.image_layout(tuple(space.shape))
    seen = f"image observation {images.describe(space)}"
    if images.value_range(space) == (0.0, 1.0):
        seen += " (a 0/1 grid: bool values are carried as uint8 0/1)"
    if min(layout.height, layout.width) < images.MIN_SIDE:
        return PolicyChoice(MULTI, f"policy=auto: {seen}, under {images.MIN_SIDE}x{images.MIN_SIDE}: "
                                   "multi-input's small-image CNN")
    if action_space is not None and not isinstance(action_space, gym.spaces.Discrete):
        return PolicyChoice(MULTI, f"policy=auto: {seen}, {type(action_space).__name__} actions: multi-input's CNN")
    return PolicyChoice(CNN, f"policy=auto: {seen}")


def trains_actor_critic(algorithm: str) -> bool:
    """Whether `algorithm` trains a feed-forward actor-critic (ppo, appo, impala)."""
    try:
        algo = registry.algorithms.get(algorithm).algorithm_cls
    except registry.UnknownNameError:
        return False  # srl.config.checks names it
    return algo.policy_kind == "actor-critic" and not algo.needs_recurrent


def _algorithm_default(algorithm: str) -> str | None:
    try:
        return registry.algorithms.get(algorithm).algorithm_cls.default_policy
    except registry.UnknownNameError:
        return None


def _kind(space: gym.Space) -> str:
    return type(space).__name__
