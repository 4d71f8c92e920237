"""Test doubles: envs whose samples prove that nothing was lost or duplicated, and pod drivers.

Not part of the runtime: `import srl` and `import srl.envs` never load this package. Tests load
it (tests/conftest.py), and a run loads it with `modules=srl.testing`:

    srl run cartpole env=counting env_kwargs.episode_length=5 modules=srl.testing

Importing it registers
- "counting" in srl's env registry (`CountingEnv`, srl.testing.counting), and `check_counts`,
  which proves from collected samples that every transition reached the trainer exactly once;
- the Gymnasium ids "srl/Counting-v0" (`CountingGymEnv`, a plain Gymnasium env for the loop
  backend) and "srl/CountingVector-v0" (`CountingVectorEnv`, a next-step autoreset vector env
  for `env_backend=vector`), which run the same checks through those paths.

`srl.testing.pod` has `train_pod`, which drives a pod kernel to a target return in-process.
`srl.testing.trainer_group` has `run_trainer_group`, which forms a group of trainers in forked
processes (tests of srl.streams.gradients).
"""

from __future__ import annotations

from srl.testing.counting import OBS_SIZE, CountingEnv, check_counts
from srl.testing.counting_gym import CountingGymEnv  # registers the Gymnasium id srl/Counting-v0
from srl.testing.counting_vector import CountingVectorEnv  # registers the Gymnasium id srl/CountingVector-v0

__all__ = ["OBS_SIZE", "CountingEnv", "CountingGymEnv", "CountingVectorEnv", "check_counts"]
