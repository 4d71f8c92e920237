"""benchmarks/ppo_ceiling.py: the parts it times are the experiment's own (its env, its policy, a
real PPO update on a batch shaped as the trainer gets one), and the ceilings follow from them."""

from __future__ import annotations

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import ppo_ceiling as bench  # noqa: E402

from srl.data import columns as C  # noqa: E402


def test_fake_batch_is_shaped_and_typed_as_a_segment_of_the_space():
    space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    batch = bench.fake_batch(space, steps=16, rows=8, actions=6, seed=3)
    assert batch[C.OBS].shape == (17, 8, 4, 84, 84) and batch[C.OBS].dtype == torch.uint8
    assert int(batch[C.OBS].float().std()) > 50  # drawn from the space, not a constant frame
    assert batch[C.ACTION].shape == (17, 8) and int(batch[C.ACTION].max()) < 6
    assert set(batch[C.REWARD].unique().tolist()) <= {-1.0, 0.0, 1.0}
    again = bench.fake_batch(space, steps=16, rows=8, actions=6, seed=3)
    assert all(torch.equal(batch[k], again[k]) for k in batch)  # seeded


def test_the_ceilings_are_the_env_steps_over_the_parts_done_in_turn():
    # 1,024 env steps: env 0.2 s on 1.5 cores, inference 0.1 s on 1, trainer 0.7 s on 2
    result = bench.summarize(1024, {"env": (0.2, 0.3), "inference": (0.1, 0.1), "trainer": (0.7, 1.4)})
    assert result["seconds_per_update"]["total"] == 1.0
    assert result["share"] == {"env": 0.2, "inference": 0.1, "trainer": 0.7}
    assert result["cores_busy"] == {"env": 1.5, "inference": 1.0, "trainer": 2.0}
    assert result["ceiling_env_steps_per_s"] == 1024.0
    assert result["ceiling_free_inference"] == round(1024 / 0.9, 1)
    assert result["ceiling_trainer_only"] == round(1024 / 0.7, 1)


def test_measure_times_each_part_of_a_real_experiment():
    result = bench.measure("cartpole-ppo", ["dataflow.sample_length=16", "dataflow.envs_per_actor=4", "launch.torch_threads=1"], repeats=1)
    assert result["env_steps_per_update"] == 64
    parts = result["seconds_per_update"]
    assert all(parts[k] > 0 for k in ("env", "inference", "trainer"))
    assert all(busy > 0 for busy in result["cores_busy"].values())
    assert result["ceiling_env_steps_per_s"] <= result["ceiling_free_inference"] <= result["ceiling_trainer_only"]
