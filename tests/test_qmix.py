"""Value decomposition on the replay dataflow: team transitions by hand (srl.data.team), the QMIX /
VDN step (srl.algos.qmix) on a cooperative matrix game, the global state in the rows
(srl.envs.central_state), the checks before launch, and learning on MPE simple_spread."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_mappo import assert_learns_past_random  # tests/ is on sys.path (conftest)

from srl.algos.mixers import QMixer
from srl.algos.qmix import QMIX, QMIXConfig, VDNConfig
from srl.api.env import Environment, EnvStep
from srl.api.policy import FieldSpec
from srl.config import ConfigError
from srl.config.load import load_config
from srl.data import columns as C
from srl.data.replay import ReplayMemory, replay_columns
from srl.data.team import team_fields, team_transitions
from srl.envs.central_state import AgentStateBox, CentralStateEnvironment
from srl.models.agent_q import AgentQ


def segment(rewards: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> dict[str, np.ndarray]:
    """A [T + 1, envs * agents] segment whose obs and actions name their step and row."""
    steps, rows = rewards.shape
    index = np.arange(steps)[:, None] * 100 + np.arange(rows)[None, :]
    return {C.OBS: index[..., None].astype(np.float32), C.ACTION: index.astype(np.int64), C.REWARD: rewards,
            C.TERMINATED: terminated, C.TRUNCATED: truncated}


def test_team_transitions_sum_the_team_reward_and_end_where_the_env_episode_ends():
    # 2 envs x 2 agents, T = 3; env 0's episode terminates at step 1, env 1's is truncated at step 2
    reward = np.array([[1, 2, 10, 20], [3, 4, 30, 40], [5, 6, 50, 60], [7, 8, 70, 80]], np.float32)
    terminated = np.zeros((4, 4), bool)
    truncated = np.zeros((4, 4), bool)
    terminated[1, 0:2] = True
    truncated[2, 2:4] = True
    terminated[0, 1] = True  # one agent of env 0 finished early: its env's episode goes on
    out = team_transitions(segment(reward, terminated, truncated), gamma=0.5, n=2, agents=2)
    assert out[C.OBS].shape == (6, 2, 1) and out[C.ACTION].shape == (6, 2)
    # step-major: (t, env) = (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)
    np.testing.assert_array_equal(out[C.ACTION][1], [2, 3])  # step 0, env 1: rows 2 and 3
    np.testing.assert_allclose(out[C.REWARD], [3 + 0.5 * 7, 30 + 0.5 * 70, 7, 70 + 0.5 * 110, 11, 110])
    # (0, 0) terminates within 2 steps: no bootstrap; (1, 1) truncates at step 2: bootstraps from it
    np.testing.assert_allclose(out[C.DISCOUNT], [0, 0.25, 0, 0.25, 0.5, 0.5])  # (2, 0): the segment ends
    np.testing.assert_array_equal(out[C.NEXT_OBS][3, :, 0], [202, 203])
    np.testing.assert_array_equal(out[C.NEXT_OBS][4, :, 0], [300, 301])  # the segment's bootstrap row
    with pytest.raises(ValueError, match="whole teams of 3"):
        team_transitions(segment(reward, terminated, truncated), gamma=0.5, n=2, agents=3)
    memory = ReplayMemory(team_fields(FieldSpec((1,), np.float32), FieldSpec((), np.int64), 2), capacity=8)
    memory.add(out)  # the memory stores whole teams
    assert memory.size == 6


SPACE = AgentStateBox(("a0", "a1"), own_dim=1, state_dim=3)
ACTIONS = gym.spaces.Discrete(2)
PAYOFF = torch.tensor([[0.0, 1.0], [1.0, 8.0]])  # monotonic, not a sum (Rashid et al. 2018, state 2B)


def team_batch(actions: torch.Tensor) -> dict[str, torch.Tensor]:
    """One-step team transitions of the matrix game (every row: own 0, its id, state [1, 0, 0])."""
    B = actions.shape[0]
    row = torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]])
    obs = row.expand(B, 2, 6).clone()
    fields = {name: torch.zeros((B, *f.shape), dtype=torch.float32) for name, f in replay_columns().items()}
    return {**fields, C.OBS: obs, C.NEXT_OBS: obs.clone(), C.ACTION: actions,
            C.REWARD: PAYOFF[actions[:, 0], actions[:, 1]], C.DISCOUNT: torch.zeros(B), C.WEIGHT: torch.ones(B)}


@pytest.mark.parametrize("config, optimum", [(QMIXConfig(lr=0.01), 8.0), (VDNConfig(lr=0.01), None)])
def test_a_qmix_step_learns_the_matrix_games_joint_value_and_writes_priorities(config, optimum):
    torch.manual_seed(0)
    policy = AgentQ(SPACE, ACTIONS, hidden_sizes=(16,))
    algo = QMIX(policy, config, total_env_steps=0)
    assert isinstance(algo.mixer, QMixer) == (config.mixer == "qmix")
    gen = torch.Generator().manual_seed(1)
    for _ in range(400):
        batch = team_batch(torch.randint(0, 2, (64, 2), generator=gen))
        stats = algo.step(batch, env_steps=0)
    assert torch.equal(batch[C.PRIORITY], batch[C.PRIORITY].abs()) and batch[C.PRIORITY].sum() > 0
    greedy = policy.rollout(team_batch(torch.zeros(1, 2, dtype=torch.long))[C.OBS][0])["action"]
    assert greedy.tolist() == [1, 1]  # both agents' own greedy action is the team's best
    if optimum is not None:  # QMIX represents the monotonic payoff; VDN cannot (a sum)
        assert stats["losses/td_loss"] < 0.05
        with torch.no_grad():
            best = algo.mixer(policy.q_values(team_batch(torch.ones(1, 2, dtype=torch.long))[C.OBS][0]).max(1).values[None],
                              policy.global_state(team_batch(torch.ones(1, 2, dtype=torch.long))[C.OBS]))
        assert best.item() == pytest.approx(optimum, abs=0.3)
    state = algo.state_dict()  # a restarted trainer continues with its mixer and target mixer
    again = QMIX(AgentQ(SPACE, ACTIONS, hidden_sizes=(16,)), config, total_env_steps=0)
    again.load_state_dict(state)
    for mine, theirs in zip(algo.mixer.state_dict().values(), again.mixer.state_dict().values()):
        assert torch.equal(mine, theirs)


class StateEnv(Environment):
    """Two agents seeing one number each, and a global state of their sum and product."""

    agents = ("a0", "a1")
    observation_spaces = {a: gym.spaces.Box(-10, 10, (1,), np.float32) for a in agents}
    action_spaces = {a: gym.spaces.Discrete(2) for a in agents}
    state_space = gym.spaces.Box(-100, 100, (2,), np.float32)

    def reset(self, seed=None):
        self.x = np.array([2.0, 3.0], np.float32)
        return {a: self.x[i : i + 1] for i, a in enumerate(self.agents)}

    def state(self):
        return np.array([self.x.sum(), self.x.prod()], np.float32)

    def step(self, actions):
        self.x += 1
        obs = {a: self.x[i : i + 1] for i, a in enumerate(self.agents)}
        return EnvStep(obs, dict.fromkeys(self.agents, 0.0), dict.fromkeys(self.agents, False),
                       dict.fromkeys(self.agents, False), {})


def test_rows_carry_the_envs_own_global_state_where_it_offers_one():
    env = CentralStateEnvironment(StateEnv())
    space = env.observation_spaces["a0"]
    assert space.state_dim == 2 and space.shape == (1 + 2 + 2,)
    rows = env.step(dict.fromkeys(env.agents, 0)).obs if env.reset() else None
    np.testing.assert_array_equal(rows["a1"], [4, 0, 1, 7, 12])  # own 4, id, state [3 + 4, 3 * 4]
    # MPE offers a state (every agent's observation side by side): the rows hold the env's own
    from srl.envs import pettingzoo_mappo_env

    spread = pettingzoo_mappo_env("mpe2.simple_spread_v3", N=3, max_cycles=25, continuous_actions=False)
    assert spread.state_reader is not None and spread.observation_spaces["agent_0"].state_dim == 54
    spread.close()


def test_qmix_without_the_global_state_is_refused_before_launch(run_dir):
    from srl.graph import build_graph

    with pytest.raises(ConfigError, match="field 'policy'.*agent-q.*vdn"):
        build_graph(load_config("mpe-spread-qmix", ["env=pettingzoo", "policy=q-mlp", f"run.run_dir={run_dir}"]))
    vdn = build_graph(load_config("mpe-spread-qmix", ["env=pettingzoo", "policy=q-mlp", "algorithm=vdn",
                                                       f"run.run_dir={run_dir}"]))
    assert vdn.team_size == 3 and vdn.batch_fields()[C.OBS].shape == (3, 18)


@pytest.mark.parametrize("mixer", ["qmix", "vdn"])
def test_mpe_spread_qmix_learns_well_above_random(run_dir, mixer):
    """Seed 1: the mean of the last 100 agent-episodes reaches random actions' + 5 (-20.81; random
    -25.81) within 45k env steps, and the run stops there: at 10.2k (qmix) and 10.3k (vdn) env
    steps here. Run to a fixed budget instead (the bar was random + 4 there), seeds 1 and 2 of
    both mixers stood 2.7-3.2 above it at 45k, seed 1 3.5-4.0 at 60k."""
    assert_learns_past_random("mpe-spread-qmix", run_dir, "run.seed=1", "stop.total_env_steps=45000", f"algo.mixer={mixer}")


@pytest.mark.parametrize("mixer", ["qmix", "vdn"])
def test_a_team_of_some_agents_trains_beside_another_policy(run_dir, mixer):
    """A policy's team is its own agents: its items hold the two agents mapped to it, and QMIX's
    mixer mixes those two under the env's global state; the third agent's policy learns from teams
    of one."""
    from srl.checkpoint import load_latest
    from srl.launch.run import run_experiment

    config = load_config("mpe-spread-qmix", [
        f"algo.mixer={mixer}", "policies={pair: {}, lone: {}}", "policy_mapping={agent_2: lone, 'agent_*': pair}",
        "launch.launcher=inline", "stop.total_env_steps=5000", f"run.run_dir={run_dir}", "monitor.display=off"])
    assert run_experiment(config) == 0
    if mixer == "qmix":  # the pair's mixer weighs two agents' Qs, the lone one's one
        for name, agents in (("pair", 2), ("lone", 1)):
            state = load_latest(run_dir / "policies" / name, None, apply=lambda s: None)
            w1 = next(v for k, v in state["algorithm"]["mixer"].items() if k.startswith("hyper_w1") and k.endswith("2.weight"))
            assert w1.shape[0] == agents * config.algo_config.mixer_embed_dim, (name, w1.shape)
    policies = json.loads((run_dir / "summary.json").read_text())["policies"]
    assert policies["pair"]["updates"] > 0 and policies["lone"]["updates"] > 0
    assert policies["pair"]["episodes"] == 2 * policies["lone"]["episodes"]
