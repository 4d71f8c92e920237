"""MAPPO: decentralized actors, a centralized critic, policy groups, and learning on MPE spread."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from srl.config import ConfigError
from srl.config.load import load_config
from srl.data import columns as C
from srl.envs.central_state import AgentStateBox
from srl.models.mappo import MAPPOPolicy, group_of_agents

AGENTS = ("adversary_0", "agent_0", "agent_1")
SPACE = AgentStateBox(AGENTS, own_dim=4)
ACTIONS = __import__("gymnasium").spaces.Discrete(5)


def rows(seed: int = 0) -> torch.Tensor:
    """One env's three rows in the CentralStateEnvironment layout."""
    own = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
    return torch.cat([own, torch.eye(3), own.reshape(1, -1).expand(3, -1)], dim=1)


def test_groups_by_longest_prefix_and_unmatched_agents_are_named():
    groups = {"a": "good", "adversary": "bad"}
    assert group_of_agents(AGENTS, groups) == [1, 0, 0]
    assert group_of_agents(AGENTS, {}) == [0, 0, 0]
    with pytest.raises(ValueError, match="'adversary_0' matches none"):
        group_of_agents(AGENTS, {"agent": "good"})


def test_actor_sees_its_own_observation_and_the_critic_sees_everyone():
    torch.manual_seed(0)  # not whatever earlier tests left: a draw can make two log-probs nearly equal
    policy = MAPPOPolicy(SPACE, ACTIONS)
    obs = rows()
    other = obs.clone()
    other[:, 3 + 4 + 4 :] += 1.0  # change agent_1's (and only its) part of the global state
    other[2, :4] += 1.0  # ... and agent_1's own observation, consistently
    before, after = policy.analyze(obs, torch.zeros(3)), policy.analyze(other, torch.zeros(3))
    torch.testing.assert_close(before[C.LOG_PROB][:2], after[C.LOG_PROB][:2])  # others' actors: unchanged
    assert not torch.allclose(before[C.LOG_PROB][2], after[C.LOG_PROB][2])
    assert not torch.allclose(before[C.VALUE][:2], after[C.VALUE][:2])  # everyone's critic noticed


def test_policy_groups_share_no_parameters():
    policy = MAPPOPolicy(SPACE, ACTIONS, policy_groups={"adversary": "bad", "agent": "good"})
    assert policy.num_groups == 2
    out = policy.analyze(rows()[:1], torch.zeros(1))  # the adversary's row only
    (out[C.LOG_PROB].sum() + out[C.VALUE].sum()).backward()
    for g, (actor, critic) in enumerate(zip(policy.actors, policy.critics)):
        grads = [p.grad for p in [*actor.parameters(), *critic.parameters()]]
        if g == 0:
            assert all(x is not None and x.abs().sum() > 0 for x in grads[-2:])
        else:
            assert all(x is None or x.abs().sum() == 0 for x in grads)
    shared = MAPPOPolicy(SPACE, ACTIONS)
    assert shared.num_groups == 1 and len(shared.actors) == 1


def test_a_waiting_row_is_inactive_and_masks_are_kept():
    space = AgentStateBox(("p0", "p1"), own_dim=5, mask_dim=3)
    policy = MAPPOPolicy(space, __import__("gymnasium").spaces.Discrete(3))
    own = torch.tensor([[0.3, 0.1, 0.0, 1.0, 0.0], [0.3, 0.1, 0.0, 0.0, 0.0]])
    obs = torch.cat([own, torch.eye(2), own.reshape(1, -1).expand(2, -1)], dim=1)
    for _ in range(20):
        out = policy.rollout(obs)
        assert out["action"].tolist() == [1, 0]
        assert out[C.ACTIVE].tolist() == [1.0, 0.0]


def test_policy_needs_the_global_state_and_bad_groups_name_the_field():
    with pytest.raises(TypeError, match="pettingzoo-mappo"):
        MAPPOPolicy(__import__("gymnasium").spaces.Box(-1, 1, (4,)), ACTIONS)
    with pytest.raises(ConfigError, match="policy_kwargs.*'agent_0' matches none"):
        from srl.graph import build_graph

        build_graph(load_config("mpe-mappo", ['policy_kwargs={"policy_groups": {"adv": "x"}}']))


def test_a_missing_package_names_the_extra():
    from srl.envs.pettingzoo_env import make_pettingzoo_env

    with pytest.raises(ImportError, match=r"pip install 'srl\[pettingzoo\]'"):
        make_pettingzoo_env("mpe2_not_installed.simple_spread_v3")


def test_mpe_mappo_without_mpe2_says_which_extra(monkeypatch):
    import sys

    from srl.graph import build_graph

    monkeypatch.setitem(sys.modules, "mpe2", None)  # import mpe2 now raises ImportError
    monkeypatch.delitem(sys.modules, "mpe2.simple_spread_v3", raising=False)
    with pytest.raises(ConfigError, match=r"field 'env'.*pip install 'srl\[pettingzoo\]'"):
        build_graph(load_config("mpe-mappo", []))


BUDGET_ENV_STEPS = 45_000


def random_return(env_kwargs: dict, episodes: int, seed: int) -> float:
    """Mean per-agent return of uniformly random actions on the same env."""
    from srl.envs import make_vector_env

    venv = make_vector_env("pettingzoo-mappo", env_kwargs, num_envs=8, env_index_offset=0)
    rng, returns, running = np.random.default_rng(seed), [], np.zeros(venv.num_rows)
    venv.reset(seed=seed)
    while len(returns) < episodes * len(venv.agents):
        step = venv.step(rng.integers(0, venv.action_space.n, venv.num_rows))
        running += step.reward
        done = step.terminated | step.truncated
        returns += running[done].tolist()
        running[done] = 0.0
    venv.close()
    return float(np.mean(returns))


def assert_learns_past_random(experiment: str, run_dir, *overrides: str, above: float = 5.0) -> None:
    """`experiment` reaches a mean return over its last 100 agent-episodes `above` that of random
    actions (`random_return`, 200 episodes) within its env-step budget, and stops there."""
    from srl.launch.run import run_experiment

    env_kwargs = load_config(experiment, [f"run.run_dir={run_dir}", *overrides]).env_kwargs
    baseline = random_return(env_kwargs, episodes=200, seed=3)  # about -26 per agent on simple_spread
    config = load_config(experiment, [f"run.run_dir={run_dir}", *overrides, f"stop.target_return={baseline + above:.3f}",
                                      "monitor.display=off"])  # fmt: skip
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), (baseline, summary)
    assert summary["episode_return_mean"] >= baseline + above, (baseline, summary["episode_return_mean"])


def test_mpe_mappo_learns_well_above_random(run_dir):
    """Inline (deterministic), seed 1: the mean of the last 100 agent-episodes reaches random
    actions' + 5 (-20.81; random -25.81) within 45k env steps, and the run stops there: at 28.4k
    env steps. Run to the full 45k it stood at -20.31, with dips to -22.65 on the way (the bar
    was random + 4 at the budget then)."""
    assert_learns_past_random("mpe-mappo", run_dir, "launch.launcher=inline", "run.seed=1",
                              f"stop.total_env_steps={BUDGET_ENV_STEPS}")  # fmt: skip


def test_paper_scale_is_the_papers_team_reward_on_every_step():
    """Step PettingZoo's simple_spread (local_ratio 0.5) with random actions; on every step the
    MAPPO paper's shared reward, computed from the world as its MPE code does (self-collision
    included), equals paper_spread_return's conversion of the per-agent rewards, collisions or not."""
    from mpe2 import simple_spread_v3 as spread

    from srl.experiments.multiagent import SPREAD_KWARGS, paper_spread_return

    kwargs = {k: v for k, v in SPREAD_KWARGS.items() if k != "module"}
    env, rng = spread.parallel_env(**kwargs), np.random.default_rng(5)

    def paper_reward(world) -> tuple[float, int]:
        positions = np.array([a.state.p_pos for a in world.agents])
        distance_sum = sum(np.linalg.norm(positions - lm.state.p_pos, axis=1).min() for lm in world.landmarks)
        touching = sum(
            np.linalg.norm(a.state.p_pos - b.state.p_pos) < a.size + b.size for a in world.agents for b in world.agents
        )
        return -len(world.agents) * distance_sum - touching, touching - len(world.agents)

    contacts = 0  # steps on which two different agents touch
    for episode in range(20):
        env.reset(seed=episode)
        per_agent_episode, paper_episode = 0.0, 0.0
        for _ in range(kwargs["max_cycles"]):
            _, rewards, *_ = env.step({agent: int(rng.integers(5)) for agent in env.agents})
            paper, others = paper_reward(env.unwrapped.world)
            assert paper == pytest.approx(2 * sum(rewards.values()) - len(rewards), abs=1e-9)
            contacts += others > 0
            per_agent_episode += float(np.mean(list(rewards.values())))
            paper_episode += paper
        assert paper_episode == pytest.approx(paper_spread_return(per_agent_episode), abs=1e-6)
    assert contacts > 0, "no step had two agents touching: the collision terms went untested"
