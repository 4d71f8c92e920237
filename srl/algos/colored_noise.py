"""Colored action noise for SAC's actors (Eberhard et al., "Pink Noise Is All You Need", 2023).

SAC acts with a = tanh(mean + std * eps). With white noise, eps is drawn afresh at every step, and
in a task that needs one push held for many steps (the car of MountainCarContinuous rocking out of
its valley) the pushes cancel: the car jitters at the bottom. Colored noise has the power
spectrum 1/f^beta (beta 0: white, 1: pink, 2: red, a random walk): with beta > 0 eps drifts
slowly, so an exploring push persists while each step's eps stays a unit Gaussian.

Only acting changes: training samples white noise as before (the noise is the behaviour's, not
the policy's). Every env row of every (actor, split) slot has its own stream, advanced one step
per request of that slot; streams are generated `period_steps` at a time (pink.ColoredNoiseProcess,
from the authors' pink-noise-rl), which should be about an episode's length.
"""

from __future__ import annotations

import numpy as np
from pink import ColoredNoiseProcess


class ColoredActionNoise:
    """eps for each row of a slot, one step of its own colored stream per call."""

    def __init__(self, beta: float, period_steps: int, action_dim: int, seed: int) -> None:
        self.beta, self.period_steps, self.action_dim, self.seed = beta, period_steps, action_dim, seed
        self.streams: dict[tuple[int, int], ColoredNoiseProcess] = {}

    def draw(self, actor: int, split: int, rows: int) -> np.ndarray:
        """The next eps of (actor, split)'s rows: [rows, action_dim] float32, each a unit Gaussian."""
        stream = self.streams.get((actor, split))
        if stream is None:  # seeded by the slot, so no result depends on which worker serves it
            rng = np.random.default_rng([self.seed, actor, split])
            stream = ColoredNoiseProcess(self.beta, (rows, self.action_dim, self.period_steps), rng=rng)
            self.streams[(actor, split)] = stream
        return np.asarray(stream.sample(), np.float32).reshape(rows, self.action_dim)
