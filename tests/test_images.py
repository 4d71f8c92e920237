"""Images as pip packages give them (issue 37): the layout read one way everywhere (srl.images),
a CNN by default for an image Box, values scaled by the space's bounds (a 0/1 grid is not divided
by 255), bool grids carried as uint8 on purpose, and the policy that acts named with its reason
(srl graph, srl show, the run's first lines, config.yaml). With the real envs: Crafter's 64x64x3
frames train actor-critic-cnn; MinAtar Breakout's default policy is a CNN and learns."""

from __future__ import annotations

import json

import crafter_env  # noqa: F401  (registers Crafter-v1, a Gymnasium wrapper of crafter.Env)
import gymnasium as gym
import minatar_env  # noqa: F401  (registers MinAtar's ids, which MinAtar does only when called)
import numpy as np
import pytest
import torch
import yaml
from gymnasium.spaces import Box, Dict, Discrete

from srl.cli import main
from srl.config.checks import build_config
from srl.graph import build_graph, make_policy
from srl.graph.default_policy import choose_policy
from srl.images import image_layout, is_image, value_range
from srl.launch.run import run_experiment
from srl.models.cnn import ActorCriticCNN
from srl.models.multi_input import ImageCNN, MultiInputActorCritic
from srl.spaces import leaf_array_spec

BREAKOUT = "minatar_env:MinAtar/Breakout-v1"
CRAFTER = "crafter_env:Crafter-v1"


# -- the layout: one rule --------------------------------------------------------------------------


@pytest.mark.parametrize("shape,name,chw", [
    ((64, 64, 3), "HxWxC", (3, 64, 64)),  # Crafter
    ((210, 160, 3), "HxWxC", (3, 210, 160)),  # Atari's RGB frame
    ((10, 10, 4), "HxWxC", (4, 10, 10)),  # MinAtar
    ((7, 7, 20), "HxWxC", (20, 7, 7)),  # MiniGrid's one-hot view: more channels than sides, square
    ((4, 84, 84), "CxHxW", (4, 84, 84)),  # stacked Atari frames
    ((20, 7, 7), "CxHxW", (20, 7, 7)),
    ((84, 84), "HxW", (1, 84, 84)),
    ((3, 3, 3), "CxHxW", (3, 3, 3)),  # ambiguous: torch's own layout
    ((5, 8, 5), "CxHxW", (5, 8, 5)),  # ambiguous: a tie of the first and last dims
    ((40, 50, 2), "HxWxC", (2, 40, 50)),  # not square: the smaller of the first and last dims
])
def test_the_layout_is_decided_by_one_rule(shape, name, chw):
    layout = image_layout(shape)
    assert (layout.name, layout.chw) == (name, chw)


def test_which_boxes_are_images_and_how_their_values_are_scaled():
    assert is_image(Box(0, 255, (64, 64, 3), np.uint8)) and is_image(Box(0, 255, (84, 84), np.uint8))
    assert is_image(Box(0, 1, (10, 10, 4), bool)) and is_image(Box(0, 10, (7, 7, 3), np.int64))
    assert not is_image(Box(0, 255, (16,), np.uint8))  # a vector of bytes
    assert not is_image(Box(0.0, 1.0, (8, 8, 3), np.float32))  # floats are features already
    assert not is_image(Box(-1, 300, (8, 8, 3), np.int64))  # beyond a byte
    assert value_range(Box(0, 255, (4, 4), np.uint8)) == (0.0, 255.0)
    assert value_range(Box(0, 1, (4, 4), np.uint8)) == (0.0, 1.0)
    assert value_range(Box(2, 12, (4, 4), np.uint8)) == (2.0, 12.0)


def test_a_bool_grid_is_carried_as_uint8_with_its_bounds():
    shape, dtype, reported = leaf_array_spec(Box(0, 1, (10, 10, 4), bool))
    assert (shape, dtype) == ((10, 10, 4), np.uint8)
    assert reported.dtype == np.uint8 and value_range(reported) == (0.0, 1.0)
    shape, dtype, reported = leaf_array_spec(Box(0, 10, (7, 7, 3), np.int64))  # small integer ids
    assert dtype == np.uint8 and value_range(reported) == (0.0, 10.0)
    assert leaf_array_spec(Box(0, 10, (3,), np.int64))[1] == np.float32  # a vector stays float32


# -- the CNNs read HxWxC and scale by the bounds ---------------------------------------------------


def test_actor_critic_cnn_reads_a_crafter_frame_channels_last():
    torch.manual_seed(0)
    last = ActorCriticCNN(Box(0, 255, (64, 64, 3), np.uint8), Discrete(17))  # was refused: "got (64, 64, 3)"
    first = ActorCriticCNN(Box(0, 255, (3, 64, 64), np.uint8), Discrete(17))
    assert last.trunk[0].in_channels == 3
    first.load_state_dict(last.state_dict())
    frames = torch.randint(0, 256, (4, 3, 64, 64), dtype=torch.uint8)
    torch.testing.assert_close(last.analyze(frames.permute(0, 2, 3, 1), torch.zeros(4))["value"],
                               first.analyze(frames, torch.zeros(4))["value"])


def _first_conv_input(module: torch.nn.Module, conv: torch.nn.Module, obs: torch.Tensor) -> torch.Tensor:
    seen = []
    hook = conv.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    try:
        module(obs)
    finally:
        hook.remove()
    return seen[0]


@pytest.mark.parametrize("high,expected", [(255, 1 / 255), (1, 1.0), (10, 0.1)])
def test_both_cnns_scale_by_the_space_bounds(high, expected):
    grid = torch.ones(2, 40, 40, 3, dtype=torch.uint8)
    space = Box(0, high, (40, 40, 3), np.uint8)
    cnn = ActorCriticCNN(space, Discrete(3))
    seen = _first_conv_input(lambda x: cnn.value(x), cnn.trunk[0], grid)
    torch.testing.assert_close(seen, torch.full_like(seen, expected))
    encoder = ImageCNN(space, 32)
    seen = _first_conv_input(encoder, encoder.trunk[0], grid)
    torch.testing.assert_close(seen, torch.full_like(seen, expected))


def test_a_small_grid_in_a_dict_gets_the_cnn_and_is_not_divided_by_255():
    policy = MultiInputActorCritic(Dict({"grid": Box(0, 1, (10, 10, 4), np.uint8), "v": Box(-1, 1, (2,))}),
                                   Discrete(3))
    assert policy.encoders_chosen == {"grid": "cnn", "v": "mlp"}
    grid = torch.ones(2, 10, 10, 4, dtype=torch.uint8)
    seen = _first_conv_input(policy.encoders[0], policy.encoders[0].trunk[0], grid)
    assert seen.shape == (2, 4, 10, 10) and float(seen.max()) == 1.0


# -- the default policy, and saying which acts -----------------------------------------------------


def _graph(*overrides: str):
    from srl.config.load import load_config

    return build_graph(load_config("cartpole-ppo", list(overrides)))


def test_the_default_policy_for_an_rgb_image_is_the_cnn_and_config_yaml_records_it(tmp_path):
    graph = _graph(f"env={CRAFTER}")
    assert graph.policy_choice.name == graph.config.policy == "actor-critic-cnn"
    assert ("policy: actor-critic-cnn (policy=auto: image observation Box(0, 255, (64, 64, 3), uint8), HxWxC, "
            "values / 255)") in graph.describe()
    graph.config.dump_yaml(tmp_path / "config.yaml")  # what a run writes: a resume builds the same policy
    assert yaml.safe_load((tmp_path / "config.yaml").read_text())["policy"] == "actor-critic-cnn"


def test_the_default_policy_for_minatar_is_a_cnn_over_the_0_1_grid():
    graph = _graph(f"env={BREAKOUT}")
    assert graph.observation_space == Box(0, 1, (10, 10, 4), np.uint8)  # the bool grid, on purpose
    assert graph.config.policy == "multi-input"
    assert "HxWxC, values / 1 (a 0/1 grid: bool values are carried as uint8 0/1)" in graph.policy_choice.why
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    assert isinstance(policy, MultiInputActorCritic) and policy.encoders_chosen == {"": "cnn"}


def test_a_named_policy_acts_as_named_and_vectors_keep_the_mlp():
    assert _graph(f"env={BREAKOUT}", "policy=actor-critic-mlp").config.policy == "actor-critic-mlp"
    assert _graph().policy_choice.name == "actor-critic-mlp"  # CartPole: a vector
    config = build_config({"experiment": "x", "env": "CartPole-v1"})
    image = Box(0, 255, (84, 84), np.uint8)
    assert choose_policy(config, image, Discrete(6)).name == "actor-critic-cnn"  # one grey frame
    assert choose_policy(config, image, Box(-1, 1, (2,))).name == "multi-input"  # the CNN takes Discrete only
    assert choose_policy(config, Dict({"a": image}), Discrete(2)).name == "multi-input"


def test_an_algorithm_without_a_cnn_says_so():
    config = build_config({"experiment": "x", "env": "CartPole-v1", "algorithm": "dqn", "replay": {}})
    why = choose_policy(config, Box(0, 255, (64, 64, 3), np.uint8), Discrete(17)).why
    assert "algorithm dqn has no CNN policy" in why


def test_srl_show_and_srl_graph_name_the_policy_and_why(capsys):
    assert main(["show", "cartpole-ppo", f"env={CRAFTER}"]) == 0
    shown = capsys.readouterr().out
    assert "policy: auto" in shown
    assert "# policy: actor-critic-cnn (policy=auto: image observation Box(0, 255, (64, 64, 3), uint8), HxWxC" in shown
    yaml.safe_load(shown)  # still a config file
    assert main(["graph", "cartpole-ppo", f"env={BREAKOUT}"]) == 0
    assert "policy: multi-input (policy=auto: image observation Box(0, 1, (10, 10, 4), uint8)" in capsys.readouterr().out


# -- real envs, end to end -------------------------------------------------------------------------


def _run_config(env: str, run_dir, env_steps: int, **values):
    return build_config({
        "experiment": "images", "env": env, "launcher": "inline", "num_actor_workers": 1, "ring_splits": 1,
        "inference": "inline", "segment_slots": 1, "max_policy_lag": 5, "total_env_steps": env_steps,
        "seed": 1, "run_dir": str(run_dir), "display": "off", **values,
    })


@pytest.mark.timeout(300)  # a Crafter world takes seconds to build
def test_crafter_trains_actor_critic_cnn_as_given(run_dir, capsys):
    # 2 envs: building a Crafter world takes seconds, a step ~5-20 ms; 8 updates of 256 steps
    config = _run_config(CRAFTER, run_dir, 2_048, policy="actor-critic-cnn", envs_per_actor=2, sample_length=128,
                         algo={"epochs": 1, "num_minibatches": 2})
    assert run_experiment(config) == 0
    assert "policy: actor-critic-cnn (policy=actor-critic-cnn as given)" in capsys.readouterr().err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= 2_048 and summary["updates"] >= 8, summary


BREAKOUT_ENV_STEPS = 16_384  # about 40 s on 2 loaded cores
RANDOM_BREAKOUT = 0.6  # mean return of random play, measured below for this seed; 1.4 at this budget (seed 1)


def _random_breakout_return(episodes: int = 100) -> float:
    env, rng, returns = gym.make("MinAtar/Breakout-v1"), np.random.default_rng(1), []
    for episode in range(episodes):
        env.reset(seed=episode)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(3)))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_minatar_breakout_default_policy_is_a_cnn_that_learns(run_dir, capsys):
    assert _random_breakout_return() < RANDOM_BREAKOUT
    config = _run_config(BREAKOUT, run_dir, BREAKOUT_ENV_STEPS, envs_per_actor=8, sample_length=128,
                         algo={"lr": 5e-4, "epochs": 4, "num_minibatches": 4, "gamma": 0.99, "gae_lambda": 0.95})
    assert run_experiment(config) == 0
    assert "policy: multi-input (policy=auto: image observation Box(0, 1, (10, 10, 4), uint8)" in capsys.readouterr().err
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["policy"] == "multi-input"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["episode_return_mean"] >= 2 * RANDOM_BREAKOUT, summary
