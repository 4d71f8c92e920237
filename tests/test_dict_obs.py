"""Dict and Tuple observations: a column per leaf (dtype kept) from the env to the policy, the
multi-input policy that reads them, PPO and APPO learning from them on every transport, and one
clear error for the spaces srl cannot hold (srl.spaces, srl.models.multi_input)."""

from __future__ import annotations

import json

import dict_obs_env
import gymnasium as gym
import numpy as np
import pytest
import recording  # noqa: F401  (registers the "record" algorithm)
import torch

from srl.config import ConfigError
from srl.config.checks import build_config
from srl.envs import GymVectorEnv, SerialVectorEnv
from srl.evaluate import evaluate_run
from srl.graph import build_graph, make_policy
from srl.launch.run import run_experiment
from srl.models.multi_input import MultiInputActorCritic
from srl.spaces import (
    UnsupportedSpace,
    assign,
    flatten_value,
    leaf_spaces,
    obs_buffers,
    obs_fields,
    obs_of,
    put_row,
    reported_space,
    unflatten_value,
)
from srl.workers.nonfinite import EnvGuard

Box, Discrete, Dict, Tuple = gym.spaces.Box, gym.spaces.Discrete, gym.spaces.Dict, gym.spaces.Tuple
NESTED = Dict({
    "image": Box(0, 255, (3, 5, 5), np.uint8),
    "state": Dict({"pos": Box(-1.0, 1.0, (2,), np.float64), "mode": Discrete(3, start=1)}),
    "extras": Tuple((gym.spaces.MultiBinary(4), Tuple((gym.spaces.MultiDiscrete([2, 3]), Box(0, 1, (1,)))))),
})
PATHS = ["extras/0", "extras/1/0", "extras/1/1", "image", "state/mode", "state/pos"]  # Dict keys sorted by gymnasium
NESTED_DTYPES = {path: leaf.dtype for path, leaf in leaf_spaces(NESTED).items()}


# -- flattening spaces and values ------------------------------------------------------------------


def test_nested_spaces_flatten_to_leaf_columns_that_keep_their_dtype():
    assert list(leaf_spaces(NESTED)) == PATHS
    fields = obs_fields(NESTED)
    assert list(fields) == [f"obs/{p}" for p in PATHS]
    dtypes = {name: (f.shape, f.dtype) for name, f in fields.items()}
    assert dtypes["obs/image"] == ((3, 5, 5), np.uint8)  # an image stays uint8
    assert dtypes["obs/state/pos"] == ((2,), np.float32)  # a float64 Box travels as float32
    assert dtypes["obs/state/mode"] == ((), np.int64)
    assert dtypes["obs/extras/0"] == ((4,), np.int8)  # MultiBinary and MultiDiscrete keep theirs
    assert dtypes["obs/extras/1/0"] == ((2,), np.int64)
    assert list(obs_fields(Box(0, 1, (4,)))) == ["obs"]  # a space that is one leaf: "obs", as before
    reported = reported_space(NESTED)
    assert reported["state"]["pos"].dtype == np.float32 and reported["image"] is NESTED["image"]


def test_values_flatten_and_unflatten_to_the_same_nesting_and_dtypes():
    NESTED.seed(3)
    value = NESTED.sample()
    flat = flatten_value(NESTED, value)
    assert list(flat) == PATHS
    back = unflatten_value(NESTED, flat)
    assert set(back) == {"image", "state", "extras"} and isinstance(back["extras"], tuple)
    np.testing.assert_array_equal(back["extras"][1][0], value["extras"][1][0])
    np.testing.assert_array_equal(back["image"], value["image"])

    rows, reported = obs_buffers(NESTED, 3)
    put_row(rows, NESTED, 1, value)
    assert rows["image"].dtype == np.uint8 and rows["state/pos"].dtype == np.float32
    np.testing.assert_array_equal(rows["image"][1], value["image"])
    assert rows["state/mode"][1] == value["state"]["mode"] and rows["state/mode"][0] == 0
    assert NESTED.contains(unflatten_value(NESTED, {p: a[1].astype(NESTED_DTYPES[p]) for p, a in rows.items()}))


def test_a_slot_hands_its_leaves_to_the_policy_as_one_dict():
    slot = {"obs/image": np.zeros((2, 3), np.uint8), "obs/v": np.zeros((2, 1), np.float32), "action": np.zeros(2)}
    obs = obs_of(slot)
    assert list(obs) == ["image", "v"] and obs["image"] is slot["obs/image"]
    assign(obs, {"image": np.full((2, 3), 7, np.uint8), "v": np.ones((2, 1))})
    assert slot["obs/image"].sum() == 42 and slot["obs/v"].sum() == 2 and slot["obs/image"].dtype == np.uint8
    assert obs_of({"obs": slot["action"], "action": 0}) is slot["action"]


def test_both_vector_envs_give_one_array_per_leaf():
    for venv in (GymVectorEnv([dict_obs_env.ImageCue() for _ in range(2)]),
                 SerialVectorEnv([dict_obs_env.make_image_cue() for _ in range(2)])):
        obs = venv.reset(seed=0)
        assert set(obs) == {"image", "vector"} and obs["image"].dtype == np.uint8 and obs["image"].shape == (2, 8, 8, 3)
        step = venv.step(np.array([0, 1]))
        assert step.obs["vector"].dtype == np.float32 and step.obs["vector"].shape == (2, 2)
        assert (step.obs["image"][..., 0] == 255).sum() == 2 * 16  # one lit 4x4 quadrant per row
        venv.close()


def test_the_nonfinite_guard_scans_each_float_leaf():
    guard = EnvGuard("error", "image-cue", first_env_index=0, agents=1, actor=0)
    obs = {"image": np.zeros((3, 2), np.uint8), "vector": np.zeros((3, 2), np.float32)}
    assert guard.bad_rows(obs, np.zeros(3, np.float32)) is None
    obs["vector"][1, 1] = np.nan
    assert guard.bad_rows(obs, np.zeros(3, np.float32)).tolist() == [False, True, False]
    with pytest.raises(Exception, match=r"non-finite observation \(key 'vector'\) \(nan\) at env index 1"):
        guard.mend(None, np.array([False, True, False]), np.zeros(3), np.zeros(3, bool), np.zeros(3, bool), obs)


# -- the multi-input policy ------------------------------------------------------------------------


def _policy(space=NESTED, **kwargs):
    torch.manual_seed(0)
    return MultiInputActorCritic(space, Discrete(4), **kwargs)


def _batch(space, n=5, seed=0):
    space.seed(seed)
    rows, _ = obs_buffers(space, n)
    for i in range(n):
        put_row(rows, space, i, space.sample())
    return {p: torch.from_numpy(a) for p, a in rows.items()}


def test_each_key_gets_its_encoder_and_a_key_can_be_overridden():
    policy = _policy()
    assert policy.encoders_chosen == {"extras/0": "flatten", "extras/1/0": "onehot", "extras/1/1": "mlp",
                                      "image": "cnn", "state/mode": "onehot", "state/pos": "mlp"}
    assert _policy(encoders={"image": "flatten"}).encoders_chosen["image"] == "flatten"
    with pytest.raises(ValueError, match=r"'cnn' needs an image"):
        _policy(encoders={"state/pos": "cnn"})
    with pytest.raises(ValueError, match=r"no observation key 'imag'; the keys are 'extras/0'"):
        _policy(encoders={"imag": "cnn"})
    with pytest.raises(ValueError, match=r"unknown encoder 'resnet'; allowed: cnn, mlp, onehot, flatten"):
        _policy(encoders={"image": "resnet"})


def test_the_policy_acts_and_explains_its_actions_from_a_dict_of_leaves():
    policy, obs = _policy(), _batch(NESTED)
    with torch.no_grad():
        out = policy.rollout(obs)
        explained = policy.analyze(obs, out["action"])
        as_float = policy.rollout({p: t.double() if p == "image" else t for p, t in obs.items()}, deterministic=True)
        as_uint8 = policy.rollout(obs, deterministic=True)
    assert out["action"].shape == (5,) and out["action"].dtype == torch.int64
    torch.testing.assert_close(explained["log_prob"], out["log_prob"])
    torch.testing.assert_close(explained["value"], out["value"])
    torch.testing.assert_close(as_float, as_uint8)  # uint8 pixels read as their values / 255


def test_an_image_is_read_with_its_channels_first_or_last():
    last, first = Box(0, 255, (8, 8, 3), np.uint8), Box(0, 255, (3, 8, 8), np.uint8)
    cnn_last, cnn_first = _policy(Dict({"i": last})).encoders[0], _policy(Dict({"i": first})).encoders[0]
    assert cnn_last.channels_last and not cnn_first.channels_last and cnn_last.chw == cnn_first.chw == (3, 8, 8)
    frames = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)
    cnn_last.load_state_dict(cnn_first.state_dict())
    torch.testing.assert_close(cnn_last(frames.permute(0, 2, 3, 1)), cnn_first(frames))
    assert _policy(Dict({"i": Box(0, 255, (3, 40, 40), np.uint8)})).encoders[0].features == 128  # Nature trunk


def test_the_default_policy_becomes_multi_input_for_a_dict_observation():
    config = build_config({"experiment": "image-cue", "env": "image-cue", "display": "off", "modules": ["dict_obs_env"]})
    graph = build_graph(config)
    fields = graph.slot_fields()
    assert fields["obs/image"].dtype == np.uint8 and fields["obs/image"].shape == (8, 8, 3)
    assert fields["obs/vector"].dtype == np.float32 and "obs" not in fields
    assert graph.actor_layout().arrays["sample.0.0.obs/image"].dtype == np.uint8
    assert "policy: multi-input (policy=auto: Dict observation" in graph.describe()
    assert isinstance(make_policy(config, graph.observation_space, graph.action_space), MultiInputActorCritic)


# -- spaces srl cannot hold ------------------------------------------------------------------------


class Missioned(gym.Env):
    """MiniGrid's observation: an image, a direction and a text mission."""

    observation_space = Dict({"image": Box(0, 255, (7, 7, 3), np.uint8), "direction": Discrete(4),
                              "mission": gym.spaces.Text(64)})
    action_space = Discrete(3)


gym.register("srl-tests/Missioned-v0", entry_point=Missioned)


def test_a_text_key_is_one_error_naming_the_env_the_key_and_what_to_do():
    with pytest.raises(ConfigError) as e:
        build_graph(build_config({"experiment": "m", "env": "srl-tests/Missioned-v0", "display": "off"}))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("field 'env': env 'srl-tests/Missioned-v0': observation key 'mission' is a Text space")
    assert "gymnasium.wrappers.FilterObservation" in message and "charset" not in message


@pytest.mark.parametrize("space,path", [
    (Tuple((Box(0, 1, (2,)), Dict({"seq": gym.spaces.Sequence(Discrete(2))}))), "1/seq"),
    (Dict({"g": gym.spaces.Graph(Box(0, 1, (2,)), Discrete(2))}), "g"),
    (gym.spaces.Text(5), ""),
    (Dict({}), ""),
])
def test_every_unsupported_leaf_is_named_by_its_path(space, path):
    with pytest.raises(UnsupportedSpace) as e:
        obs_fields(space)
    assert e.value.path == path
    assert (f"observation key {path!r}" if path else "the observation space is") in str(e.value)


# -- end to end ------------------------------------------------------------------------------------

BUDGET_ENV_STEPS = 20_000  # PPO passes 9 near 13k env steps (seed 1)
TARGET = 9.0  # of 10: random play scores 2.5, a policy that reads only the image 5


def learning_config(algorithm: str, run_dir, **overrides):
    return build_config({
        "experiment": "image-cue", "env": "srl-tests/ImageCue-v0", "algorithm": algorithm, "launcher": "inline",
        "num_actor_workers": 1, "envs_per_actor": 16, "ring_splits": 1, "inference": "inline",
        "sample_length": 32, "segment_slots": 1, "batch_segments": 1, "max_policy_lag": 5,
        "total_env_steps": BUDGET_ENV_STEPS, "target_return": TARGET, "seed": 1, "run_dir": str(run_dir),
        "display": "off", "modules": ["dict_obs_env"],
        "algo": {"lr": 1e-3, "gamma": 0.9, "epochs": 4, "num_minibatches": 2, "entropy_coef": 0.01},
        **overrides,
    })


# tcp with a policy worker: the requests carry every leaf to it (a leaf left behind reads as zeros,
# and PPO stays near the 2.5 of random play); the local launcher is not deterministic, so more budget
TCP = {"launcher": "local", "transport": "tcp", "inference": "policy_worker", "env": "image-cue",
       "num_actor_workers": 2, "envs_per_actor": 8, "ring_splits": 2, "total_env_steps": 2 * BUDGET_ENV_STEPS}


@pytest.mark.parametrize("algorithm,overrides", [("ppo", {}), ("appo", {}), ("ppo", TCP)], ids=["ppo", "appo", "ppo-tcp"])
def test_ppo_and_appo_learn_from_an_image_and_a_vector_key(algorithm, overrides, run_dir):
    assert run_experiment(learning_config(algorithm, run_dir, **overrides)) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= TARGET - 0.3, summary  # (episodes reported after the stop count too)
    if not overrides and algorithm == "ppo":  # `srl eval` reads the Dict observation too
        assert evaluate_run(run_dir, episodes=5, seed=0)["return_mean"] >= TARGET


def test_over_tcp_every_leaf_reaches_the_trainer_in_its_own_dtype(run_dir):
    """local launcher, tcp streams: the image and vector columns of the samples are carried
    between processes as frames and arrive whole (each image has its one lit quadrant)."""
    from recording import load_batches

    config = build_config({
        "experiment": "image-cue", "env": "image-cue", "algorithm": "record", "launcher": "local",
        "transport": "tcp", "algo": {"out_dir": str(run_dir / "batches")}, "num_actor_workers": 2,
        "envs_per_actor": 2, "sample_length": 8, "max_policy_lag": 10**6, "total_env_steps": 600,
        "run_dir": str(run_dir), "display": "off", "modules": ["dict_obs_env"],
    })
    assert run_experiment(config) == 0
    batches = load_batches(run_dir / "batches")
    assert batches
    for batch in batches:
        assert "obs" not in batch
        image, vector = batch["obs/image"], batch["obs/vector"]
        assert image.dtype == np.uint8 and image.shape[2:] == (8, 8, 3)
        assert vector.dtype == np.float32 and vector.shape[2:] == (2,)
        assert ((image[..., 0] == 255).sum(axis=(2, 3)) == 16).all()  # one lit quadrant in every row
        assert set(np.unique(vector[..., 0])) <= {-1.0, 1.0}
