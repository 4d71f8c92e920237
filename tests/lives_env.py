"""A counting env that tells the lives of its actor apart (importable: modules=lives_env).

Its observed env_id is `env_id * 100_000 + pid % 100_000`, so the transitions of a restarted
actor form new streams for `check_counts`: a duplicated or half-written segment, or one from a
dead life mixed into a new one, shows up as a duplicate or a gap in some stream.
"""

from __future__ import annotations

import os

from srl.api.registry import register_env
from srl.envs.counting import CountingEnv


@register_env("counting-lives")
def counting_lives(env_id: int, episode_length: int = 5) -> CountingEnv:
    return CountingEnv(env_id * 100_000 + os.getpid() % 100_000, episode_length)
