"""A counting env that tells the lives of its actor apart (importable: modules=lives_env).

Its observed env_id is `env_id * 100_000 + pid % 100_000`, so the transitions of a restarted
actor form new streams for `check_counts`: a duplicated or half-written segment, or one from a
dead life mixed into a new one, shows up as a duplicate or a gap in some stream. Each step sleeps
`step_s`, so a run lasts long enough for a test to kill workers in it, on any machine.
"""

from __future__ import annotations

import os
import time

from srl.api.registry import register_env
from srl.testing.counting import CountingEnv


class SlowCountingEnv(CountingEnv):
    def __init__(self, env_id: int, episode_length: int, step_s: float) -> None:
        super().__init__(env_id, episode_length)
        self.step_s = step_s

    def step(self, actions):
        time.sleep(self.step_s)
        return super().step(actions)


@register_env("counting-lives")
def counting_lives(env_id: int, episode_length: int = 5, step_s: float = 0.001) -> CountingEnv:
    return SlowCountingEnv(env_id * 100_000 + os.getpid() % 100_000, episode_length, step_s)
