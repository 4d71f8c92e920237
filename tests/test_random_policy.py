"""The random policy's torch-free path: valid actions, used by `Acting` only outside deterministic mode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from srl.data import columns as C
from srl.models.random_policy import RandomPolicy
from srl.streams.inline import InlineTransport
from srl.streams.params import ParamSubscriber
from srl.workers.policy import Acting

OBS = gym.spaces.Box(-1, 1, (3,), np.float32)


def test_numpy_actions_cover_a_discrete_space_with_start_and_stay_inside_a_box():
    torch.manual_seed(0)
    discrete = RandomPolicy(OBS, gym.spaces.Discrete(3, start=2)).rollout_numpy(np.zeros((3000, 3), np.float32))
    assert discrete["action"].shape == (3000,) and set(discrete["action"].tolist()) == {2, 3, 4}
    box = gym.spaces.Box(np.array([-2.0, 0.0]), np.array([-1.0, 5.0]), dtype=np.float64)
    action = RandomPolicy(OBS, box).rollout_numpy(np.zeros((500, 3), np.float32))["action"]
    assert action.shape == (500, 2) and action.dtype == np.float32
    assert ((action >= box.low) & (action <= box.high)).all() and action[:, 1].std() > 1


def test_same_torch_seed_gives_the_same_numpy_actions():
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append(RandomPolicy(OBS, gym.spaces.Discrete(5)).rollout_numpy(np.zeros((64, 3)))["action"])
    np.testing.assert_array_equal(*runs)


def test_acting_takes_the_numpy_path_except_in_deterministic_mode():
    policy = RandomPolicy(OBS, gym.spaces.Discrete(2))
    fast = Acting(policy, ParamSubscriber(InlineTransport(), policy))
    seeded = Acting(policy, ParamSubscriber(InlineTransport(), policy), sampling_seed=3)
    assert fast._rollout_numpy is not None and seeded._rollout_numpy is None
    slot = {C.OBS: np.zeros((4, 3), np.float32), C.ACTION: np.full(4, -1), "version": np.zeros(1, np.int64)}
    fast([slot], [None])
    assert set(slot[C.ACTION].tolist()) <= {0, 1}
