"""uint8 image observations stay uint8 from the env to the trainer; policies convert them."""

from __future__ import annotations

import gymnasium as gym
import image_env  # noqa: F401  (registers "counting-uint8")
import numpy as np
import pytest
import recording  # noqa: F401  (registers the "record" algorithm)
import torch

from srl.config.checks import build_config
from srl.envs import GymVectorEnv, make_vector_env
from srl.graph import build_graph, space_spec
from srl.launch.run import run_experiment
from srl.models.cnn import ActorCriticCNN
from srl.models.mlp import ActorCriticMLP
from srl.models.qmlp import QMLP
from srl.testing import check_counts

EPISODE_LENGTH = 7


class TinyImage(gym.Env):
    """Frames of 2x3x3 uint8 pixels that change with the step and the action."""

    observation_space = gym.spaces.Box(0, 255, (2, 3, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(0), {}

    def _frame(self, action):
        return np.full((2, 3, 3), (200 + 10 * self.t + action) % 256, np.uint8)

    def step(self, action):
        self.t += 1
        return self._frame(int(action)), 1.0, self.t >= 5, False, {}


def test_a_uint8_box_stays_uint8_in_vector_envs_and_on_the_wire():
    venv = GymVectorEnv([TinyImage() for _ in range(3)])
    assert venv.observation_space.dtype == np.uint8
    assert venv.reset(0).dtype == np.uint8
    out = venv.step(np.array([0, 1, 1]))
    assert out.obs.dtype == np.uint8 and out.obs[:, 0, 0, 0].tolist() == [210, 211, 211]
    assert space_spec(venv.observation_space).dtype == np.uint8
    assert space_spec(gym.spaces.Box(0, 1, (2,), np.float64)).dtype == np.float32  # other Boxes: float32


def test_every_uint8_transition_reaches_the_trainer_once_as_uint8(run_dir):
    from recording import load_batches

    config = build_config({
        "experiment": "counting-uint8", "env": "counting-uint8", "env_kwargs": {"episode_length": EPISODE_LENGTH},
        "algorithm": "record", "algo": {"out_dir": str(run_dir / "batches")}, "launcher": "inline",
        "num_actor_workers": 2, "envs_per_actor": 2, "sample_length": 5, "batch_segments": 2,
        "max_policy_lag": 10**6, "total_env_steps": 1000, "run_dir": str(run_dir), "display": "off",
    })
    graph = build_graph(config)
    assert graph.slot_fields()["obs"].dtype == np.uint8
    assert run_experiment(config) == 0
    batches = load_batches(run_dir / "batches")
    assert batches and all(b["obs"].dtype == np.uint8 for b in batches)
    totals = check_counts([b["obs"].astype(np.float32) for b in batches], [b["terminated"] for b in batches],
                          EPISODE_LENGTH)
    assert totals["envs"] == 2 * 2 and totals["transitions"] >= 500, totals


@pytest.mark.parametrize("make", [
    lambda space: ActorCriticMLP(space, gym.spaces.Discrete(2), hidden_sizes=[8]),
    lambda space: QMLP(space, gym.spaces.Discrete(2), hidden_sizes=[8]),
])
def test_policies_read_uint8_as_the_same_numbers_in_float(make):
    space = gym.spaces.Box(0, 255, (2, 3, 3), np.uint8)
    torch.manual_seed(0)
    policy = make(space)
    assert_same_outputs(policy, torch.randint(0, 256, (4, 2, 3, 3), dtype=torch.uint8))


def test_the_cnn_reads_uint8_frames_as_their_float_values():
    torch.manual_seed(0)
    policy = ActorCriticCNN(gym.spaces.Box(0, 255, (1, 36, 36), np.uint8), gym.spaces.Discrete(3))
    assert_same_outputs(policy, torch.randint(0, 256, (2, 1, 36, 36), dtype=torch.uint8))


def assert_same_outputs(policy, frames):
    """Deterministic rollouts of uint8 frames and of the same values as float32 agree."""
    with torch.no_grad():
        as_uint8 = policy.rollout(frames, deterministic=True)
        as_float = policy.rollout(frames.float(), deterministic=True)
    assert as_uint8.keys() == as_float.keys()
    for key in as_uint8:
        torch.testing.assert_close(as_uint8[key], as_float[key])


def test_atari_frames_stay_uint8_end_to_end_in_the_graph():
    venv = make_vector_env("ALE/Pong-v5", {}, num_envs=1)
    try:
        assert venv.observation_space.dtype == np.uint8 and venv.reset(0).dtype == np.uint8
    finally:
        venv.close()
    graph = build_graph(build_config({"experiment": "pong", "env": "ALE/Pong-v5", "policy": "actor-critic-cnn", "display": "off"}))
    assert graph.actor_layout().arrays["sample.0.0.obs"].dtype == np.uint8
