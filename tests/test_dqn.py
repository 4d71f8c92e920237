"""DQN maths, per-env epsilon-greedy, and the replay config checks; no processes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl.algos.dqn import DQN, DQNConfig
from srl.algos.exploration import EpsilonGreedy, apex_epsilons, slot_epsilons
from srl.config import ConfigError
from srl.config.load import load_config
from srl.data import columns as C
from srl.graph import build_graph
from srl.models.qmlp import QMLP

OBS_SPACE, ACTIONS = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)


def batch(n, obs, action, reward, discount, next_obs):
    return {C.OBS: obs, C.ACTION: action, C.REWARD: reward, C.DISCOUNT: discount, C.NEXT_OBS: next_obs,
            C.WEIGHT: torch.ones(n), C.PRIORITY: torch.zeros(n)}


def test_double_dqn_target_and_priorities_match_a_hand_computation():
    torch.manual_seed(0)
    policy = QMLP(OBS_SPACE, ACTIONS, hidden_sizes=(8,))
    algo = DQN(policy, DQNConfig(lr=1e-3, target_update_interval=1000), 0)
    with torch.no_grad():  # make the target differ from the online network
        for p in algo.target.parameters():
            p.add_(torch.randn_like(p))
    n = 16
    b = batch(n, torch.randn(n, 3), torch.randint(0, 2, (n,)), torch.randn(n), torch.rand(n), torch.randn(n, 3))
    with torch.no_grad():
        q = policy.q_values(b[C.OBS]).gather(1, b[C.ACTION][:, None])[:, 0]
        pick = policy.q_values(b[C.NEXT_OBS]).argmax(1)  # online picks, target rates
        rated = algo.target.q_values(b[C.NEXT_OBS]).gather(1, pick[:, None])[:, 0]
        expected = (b[C.REWARD] + b[C.DISCOUNT] * rated - q).abs()
    algo.step(b, 0)
    torch.testing.assert_close(b[C.PRIORITY], expected)


def test_dqn_learns_a_two_armed_bandit_and_follows_its_target():
    torch.manual_seed(1)
    policy = QMLP(OBS_SPACE, ACTIONS, hidden_sizes=(16,))
    algo = DQN(policy, DQNConfig(lr=1e-2, target_update_interval=5), 0)
    n = 64
    for _ in range(200):
        action = torch.randint(0, 2, (n,))
        b = batch(n, torch.zeros(n, 3), action, action.float(), torch.zeros(n), torch.zeros(n, 3))
        stats = algo.step(b, 0)
    q = policy.q_values(torch.zeros(1, 3))[0]
    assert abs(q[0].item()) < 0.05 and abs(q[1].item() - 1) < 0.05, q
    assert stats["losses/td_loss"] < 1e-3
    # 200 updates, a copy every 5: the target equals the online network now
    for t, p in zip(algo.target.parameters(), policy.parameters()):
        torch.testing.assert_close(t, p)
    restored = DQN(QMLP(OBS_SPACE, ACTIONS, hidden_sizes=(16,)), DQNConfig(), 0)
    restored.load_state_dict(algo.state_dict())
    assert restored.updates == 200


class UndeclaredQ(QMLP):
    kind = None  # q_values all the same: what an algorithm reads is the declaration, not the attribute


def test_q_learning_takes_only_policies_that_declare_what_it_calls():
    from srl.algos.r2d2 import R2D2, R2D2Config
    from srl.models.mlp import ActorCriticMLP
    from srl.models.recurrent import RecurrentQ

    for policy in (ActorCriticMLP(OBS_SPACE, ACTIONS), UndeclaredQ(OBS_SPACE, ACTIONS), RecurrentQ(OBS_SPACE, ACTIONS)):
        with pytest.raises(TypeError, match="DQN needs a feed-forward policy that declares kind = 'q-network'"):
            DQN(policy, DQNConfig(), 0)
    with pytest.raises(TypeError, match=r"R2D2 needs a recurrent policy .*got QMLP \(feed-forward, kind 'q-network'\)"):
        R2D2(QMLP(OBS_SPACE, ACTIONS), R2D2Config(), 0)
    R2D2(RecurrentQ(OBS_SPACE, ACTIONS), R2D2Config(), 0)


def test_apex_epsilons_follow_the_formula():
    eps = apex_epsilons(8, 0.4, 7.0)
    np.testing.assert_allclose(eps, [0.4 ** (1 + 7 * i / 7) for i in range(8)])
    assert apex_epsilons(1, 0.3, 7.0).tolist() == [0.3]
    slots = slot_epsilons(0.4, 7.0, num_actors=2, splits=2, envs_per_split=2, agents=3)
    all_eps = apex_epsilons(8, 0.4, 7.0)
    np.testing.assert_allclose(slots[(1, 0)], np.repeat(all_eps[4:6], 3))  # actor 1, split 0: envs 4, 5


def test_epsilon_greedy_explores_each_row_at_its_own_rate():
    eps = np.array([0.0, 0.5, 1.0])
    greedy = EpsilonGreedy({(0, 0): eps}, num_actions=4, start=1, seed=0)
    changed = np.zeros(3)
    for _ in range(2000):
        slot = {"action": np.zeros(3, np.int64)}  # 0 is outside the space {1..4}: replaced = visible
        greedy(slot, 0, 0)
        changed += slot["action"] != 0
        assert set(slot["action"].tolist()) <= {0, 1, 2, 3, 4}
    np.testing.assert_allclose(changed / 2000, eps, atol=0.04)


def test_annealed_epsilon_falls_from_its_start_to_each_rows_own_over_the_runs_env_steps():
    eps = np.array([0.0, 0.5])
    # 2 (actor, split) groups of 5 envs (one row each): each slot served is 10 of the run's env steps
    greedy = EpsilonGreedy({(0, 0): eps, (1, 0): eps}, num_actions=4, start=1, seed=0, anneal_env_steps=1000,
                           epsilon_start=0.9, run_envs=10)
    assert greedy._annealed(eps, (0, 0)).tolist() == [0.9, 0.9]  # env step 0
    for _ in range(49):
        greedy._annealed(eps, (0, 0))
    np.testing.assert_allclose(greedy._annealed(eps, (0, 0)), [0.45, 0.7])  # env step 500: half way
    np.testing.assert_allclose(greedy._annealed(eps, (1, 0)), [0.9, 0.9])  # each group counts its own slots
    for _ in range(60):
        late = greedy._annealed(eps, (0, 0))
    assert late.tolist() == [0.0, 0.5]  # past the schedule: the rows' own epsilons
    assert EpsilonGreedy({(0, 0): eps}, 4, 1, 0)._annealed(eps, (0, 0)) is eps  # no schedule: unchanged


@pytest.mark.parametrize(
    "overrides,field",
    [
        (["replay.capacity=1000"], "replay"),  # added to cartpole-ppo below
        (["replay=!null"], "replay"),  # (replay=null: dqn's own replay, Algorithm.default_replay)
        (["replay.batch_size=10", "replay.capacity=5", "replay.warmup=5"], "replay"),
        (["env=Pendulum-v1"], "env"),  # q-mlp and dqn need Discrete actions
        (["replay.alpha=-1"], "replay.alpha"),
        (["run.deterministic=true"], "replay"),
        (["pod.enabled=true", "env=batched-cartpole", "replay=null"], "replay"),
    ],
)
def test_replay_config_errors_name_the_field(overrides, field):
    experiment = "cartpole-ppo" if overrides == ["replay.capacity=1000"] else "cartpole-dqn"
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        build_graph(load_config(experiment, overrides))


def test_epsilon_is_dqns_own_setting_and_needs_discrete_actions():
    with pytest.raises(ConfigError, match=r"unknown field 'algo\.epsilon'"):  # PPO explores by sampling
        load_config("cartpole-ppo", ["algo.epsilon=0.1"])
    assert load_config("cartpole-dqn", []).algo_config.epsilon == 0.2  # the default is what cartpole-dqn uses
    with pytest.raises(ConfigError, match="Discrete"):
        build_graph(load_config("cartpole-dqn", ["env=Pendulum-v1", "algo.epsilon=0.1"]))
