"""Batched torch envs (srl.envs.batched) step for step against the Gymnasium originals.

How the comparison works: N Gymnasium envs and one batched env of N envs get the same actions.
After each Gymnasium reset (its own seeded RNG) the batched env's row is put into the same
state ("re-sync"); a batched row whose episode ended already holds its own next first
observation, so only reward and flags are compared on that step. The step counters (time
limits) are never synced: both count from their resets.

Tolerances, and why they are what they are:

* float64 batched envs reproduce Gymnasium's float64 arithmetic; they differ only in the last
  bit of a few operations (torch's and numpy's sin / cos, operation order). Observations are
  float32 casts of the state, so they agree to ~1 float32 ulp (<= 2.4e-7 for |x| <= 2.4) and
  the tolerance is 1e-5. But an inverted pendulum amplifies any state difference by about
  e^(4 t / s) (CartPole's unstable eigenvalue is ~4 /s): a 1e-16 difference is ~1e-5 after
  350 steps (7 s). Random-action CartPole episodes last ~20 steps and are followed free
  (re-synced only at episode ends); the balancing runs that reach the 500-step time limit are
  re-synced every 25 steps (0.5 s, amplification < e^2). The same holds for Pendulum, whose
  upright position is unstable too (and whose angle the batched env keeps wrapped to [-pi, pi)).
* float32 (the default, fast) batched envs round every operation to ~6e-8 relative. Re-synced
  every step (so one step of float32 rounding is measured against float64), observations agree
  to 1e-5 absolute and rewards to 1e-5 relative. Followed free over short random CartPole
  episodes, the rounding grows through the same instability; measured max 2.2e-5 over
  1000 x 8 steps, so that check uses 1e-4 and documents the drift rather than hiding it.
* Done flags must agree exactly everywhere: a state within 1e-5 of a threshold is rare
  enough not to happen for these seeds, and a flip would be a real bug (an off-by-one in
  the time limit, a wrong threshold).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch

from srl.api import registry
from srl.api.env import VectorStep
from srl.envs import describe_spaces, make_vector_env
from srl.envs.batched import (
    BatchedCartPole,
    BatchedPendulum,
    BatchedSpread,
    BatchedTorchEnv,
    TorchVectorEnv,
    make_batched_env,
)

Policy = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def random_cartpole(rng: np.random.Generator, obs: np.ndarray) -> np.ndarray:
    return rng.integers(0, 2, len(obs))


def balancing_cartpole(rng: np.random.Generator, obs: np.ndarray) -> np.ndarray:
    """A linear controller that balances for the whole 500 steps; env i takes a random action
    with probability 0.3 * i / (N - 1), so the later envs fail sometimes (both flags occur)."""
    x, x_dot, theta, theta_dot = obs.T
    action = (10 * theta + 2 * theta_dot + 0.5 * x + x_dot > 0).astype(np.int64)
    explore = rng.random(len(obs)) < np.linspace(0.0, 0.3, len(obs))
    return np.where(explore, rng.integers(0, 2, len(obs)), action)


def random_torque(rng: np.random.Generator, obs: np.ndarray) -> np.ndarray:
    return rng.uniform(-2.5, 2.5, (len(obs), 1)).astype(np.float32)  # beyond +-2: tests the clip


def gym_state(env: gym.Env, batched: BatchedTorchEnv) -> torch.Tensor:
    state = np.asarray(env.unwrapped.state, dtype=np.float64).copy()
    if isinstance(batched, BatchedPendulum):  # the batched pendulum keeps its angle in [-pi, pi)
        state[0] = (state[0] + math.pi) % (2 * math.pi) - math.pi
    return torch.as_tensor(state).to(batched.dtype)


def follow_gymnasium(
    env_id: str,
    batched: BatchedTorchEnv,
    policy: Policy,
    steps: int,
    seed: int,
    resync_every: int | None,
) -> dict:
    """Step `batched` and its Gymnasium twins with the same actions; return the largest
    differences and the episode-end counts. Raises on the first flag mismatch."""
    n = batched.num_envs
    twins = [gym.make(env_id) for _ in range(n)]
    rng = np.random.default_rng(seed)
    batched.reset(seed)

    def sync(i: int) -> None:
        batched.state[i] = gym_state(twins[i], batched)

    obs = []
    for i, env in enumerate(twins):
        obs.append(env.reset(seed=seed + i)[0])
        sync(i)
    obs = np.array(obs)
    out = {"obs_err": 0.0, "reward_err": 0.0, "reward_rel_err": 0.0, "terminated": 0, "truncated": 0}
    for t in range(steps):
        actions = policy(rng, obs)
        results = [env.step(a) for env, a in zip(twins, actions)]
        b_obs, b_reward, b_term, b_trunc = (x.cpu().numpy() for x in batched.step(torch.as_tensor(actions)))
        assert b_obs.dtype == np.float32 and b_reward.dtype == np.float32
        assert b_term.dtype == np.bool_ and b_trunc.dtype == np.bool_
        next_obs = []
        for i, (o, r, term, trunc, _) in enumerate(results):
            trunc = trunc and not term  # srl's convention: a row is never both
            assert (bool(b_term[i]), bool(b_trunc[i])) == (term, trunc), (
                f"step {t} env {i}: batched terminated/truncated {b_term[i]}/{b_trunc[i]}, "
                f"gymnasium {term}/{trunc}"
            )
            err = abs(float(r) - float(b_reward[i]))
            out["reward_err"] = max(out["reward_err"], err)
            out["reward_rel_err"] = max(out["reward_rel_err"], err / max(1.0, abs(float(r))))
            if term or trunc:
                out["terminated" if term else "truncated"] += 1
                o, _ = twins[i].reset()
                sync(i)
            else:
                out["obs_err"] = max(out["obs_err"], float(np.abs(o - b_obs[i]).max()))
                if resync_every is not None and (t + 1) % resync_every == 0:
                    sync(i)
            next_obs.append(o)
        obs = np.array(next_obs)
    for env in twins:
        env.close()
    return out


# ------------------------------------------------------------------------------ CartPole


def test_cartpole_float64_random_actions_follow_gymnasium_free():
    out = follow_gymnasium("CartPole-v1", BatchedCartPole(8, dtype="float64"), random_cartpole, 600, 1, None)
    assert out["terminated"] > 100  # ~22-step episodes
    assert out["obs_err"] <= 1e-5 and out["reward_err"] == 0.0, out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cartpole_balancing_reaches_time_limit_like_gymnasium(dtype):
    resync = 25 if dtype == "float64" else 1
    env = BatchedCartPole(8, dtype=dtype)
    out = follow_gymnasium("CartPole-v1", env, balancing_cartpole, 1200, 2, resync)
    assert out["truncated"] >= 4, out  # the 500-step limit, counted by the batched env's own counters
    assert out["terminated"] >= 1, out
    assert out["obs_err"] <= 1e-5 and out["reward_err"] == 0.0, out


def test_cartpole_float32_one_step_matches_gymnasium():
    out = follow_gymnasium("CartPole-v1", BatchedCartPole(8), random_cartpole, 600, 3, 1)
    assert out["terminated"] > 100
    assert out["obs_err"] <= 1e-5 and out["reward_err"] == 0.0, out


def test_cartpole_float32_drift_over_free_random_episodes():
    out = follow_gymnasium("CartPole-v1", BatchedCartPole(8), random_cartpole, 1000, 1, None)
    assert out["terminated"] > 200
    assert out["obs_err"] <= 1e-4, out  # float32 rounding grown by the unstable pole (see module doc)


def test_cartpole_rejects_invalid_actions():
    env = BatchedCartPole(4)
    env.reset(0)
    with pytest.raises((IndexError, RuntimeError)):
        env.step(torch.tensor([0, 1, 2, 0]))
    with pytest.raises(ValueError):
        env.step(torch.tensor([0, 1, 1]))


# ------------------------------------------------------------------------------ Pendulum


@pytest.mark.parametrize("dtype, resync", [("float64", 25), ("float32", 1)])
def test_pendulum_follows_gymnasium(dtype, resync):
    out = follow_gymnasium("Pendulum-v1", BatchedPendulum(6, dtype=dtype), random_torque, 700, 4, resync)
    assert out["truncated"] == 6 * 3 and out["terminated"] == 0, out  # 200-step limit, 3 times per env
    assert out["obs_err"] <= 1e-5 and out["reward_rel_err"] <= 1e-5, out


def test_pendulum_float64_free_within_an_episode_start():
    """Free-running float64 over the first 25 steps of each episode (before the chaos grows)."""
    out = follow_gymnasium("Pendulum-v1", BatchedPendulum(6, dtype="float64"), random_torque, 25, 5, None)
    assert out["obs_err"] <= 1e-6 and out["reward_rel_err"] <= 1e-6, out


# ------------------------------------------------------------------------------ Spread


def test_spread_shapes_rows_and_reward():
    env = BatchedSpread(5, num_agents=3)
    assert env.agents == ("agent_0", "agent_1", "agent_2") and env.num_rows == 15
    assert env.observation_space.shape == (4 + 2 * 3 + 2 * 2,)
    assert env.action_space == gym.spaces.Discrete(5)
    obs = env.reset(seed=3)
    assert obs.shape == (15, 14) and obs.dtype == torch.float32
    pos, landmarks = env.agent_pos.clone(), env.landmark_pos.clone()
    assert pos.abs().max() <= 1 and landmarks.abs().max() <= 1
    o = obs.view(5, 3, 14)
    assert torch.equal(o[:, :, 0:2], torch.zeros(5, 3, 2))  # velocities start at 0
    assert torch.allclose(o[:, :, 2:4], pos)
    assert torch.allclose(o[:, 1, 4:6], landmarks[:, 0] - pos[:, 1])  # landmark 0 seen from agent 1
    assert torch.allclose(o[:, 1, 10:12], pos[:, 0] - pos[:, 1])  # agent 0 seen from agent 1
    assert torch.allclose(o[:, 1, 12:14], pos[:, 2] - pos[:, 1])  # agent 2 seen from agent 1

    # agent 0 of env 0 pushes +x, everything else stays
    actions = torch.zeros(15, dtype=torch.long)
    actions[0] = 2
    obs, reward, terminated, truncated = env.step(actions)
    assert torch.allclose(env.agent_vel[0, 0], torch.tensor([0.5, 0.0]))  # 5.0 * 0.1
    assert torch.allclose(env.agent_pos[0, 0], pos[0, 0] + torch.tensor([0.05, 0.0]))
    assert torch.equal(env.agent_pos[1:], pos[1:])
    # shared reward = -sum over landmarks of the distance to the nearest agent, on every agent row
    expected = -torch.cdist(landmarks, env.agent_pos).amin(dim=2).sum(dim=1)
    assert torch.allclose(reward.view(5, 3), expected.unsqueeze(1).expand(5, 3), atol=1e-6)
    assert (reward < 0).all() and not terminated.any() and not truncated.any()


def test_spread_episodes_are_25_steps_and_reward_is_zero_on_the_landmarks():
    env = BatchedSpread(4, num_agents=2)
    env.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    for t in range(1, 51):
        _, reward, terminated, truncated = env.step(torch.randint(0, 5, (8,), generator=g))
        assert not terminated.any()
        assert bool(truncated.all()) == (t % 25 == 0) and (truncated.any() == truncated.all())
    # put the agents exactly on the landmarks: the next step without pushes (velocities zeroed) costs 0
    env.agent_pos.copy_(env.landmark_pos)
    env.agent_vel.zero_()
    _, reward, _, _ = env.step(torch.zeros(8, dtype=torch.long))
    assert torch.allclose(reward, torch.zeros(8), atol=1e-6)


def test_spread_seeded_resets_repeat():
    a, b = BatchedSpread(3), BatchedSpread(3)
    assert torch.equal(a.reset(seed=9), b.reset(seed=9))
    assert not torch.equal(a.reset(seed=9), b.reset(seed=10))


# ------------------------------------------------------------------------------ auto-reset, devices


@pytest.mark.parametrize("sync_free", [False, True])
def test_auto_reset_gives_next_first_obs_and_restarts_counters(sync_free):
    env = BatchedCartPole(64, max_episode_steps=10)
    env.sync_free_reset = sync_free  # the dense (GPU) path, exercised on the CPU
    env.reset(seed=1)
    g = torch.Generator().manual_seed(1)
    for _ in range(40):
        before = env.elapsed.clone()
        obs, reward, terminated, truncated = env.step(torch.randint(0, 2, (64,), generator=g))
        done = terminated | truncated
        assert not (terminated & truncated).any()
        assert torch.equal(truncated, (before + 1 >= 10) & ~terminated)
        assert torch.equal(env.elapsed, torch.where(done, 0, before + 1).int())
        assert obs[done].abs().max() <= 0.05 if done.any() else True  # fresh uniform(-0.05, 0.05) states
        assert torch.equal(reward, torch.ones(64))


def test_seeded_reset_is_reproducible():
    a, b = BatchedPendulum(16), BatchedPendulum(16)
    assert torch.equal(a.reset(seed=5), b.reset(seed=5))
    actions = torch.linspace(-2, 2, 16).unsqueeze(1)
    for _ in range(250):  # crosses one auto-reset
        for x, y in zip(a.step(actions), b.step(actions)):
            assert torch.equal(x, y)


def _same_dynamics(cpu: BatchedCartPole, other: BatchedCartPole, to_other) -> None:
    """`other` (another device, or the dense reset path) steps as `cpu` does while no episode
    ends; an env that ended draws its next start from each side's own random stream, so it is
    compared no more (the sparse path draws for the ended envs only, the dense one for all)."""
    cpu.reset(0)
    other.reset(0)
    other.state.copy_(to_other(cpu.state))
    g = torch.Generator().manual_seed(0)
    fresh = torch.ones(cpu.num_envs, dtype=torch.bool)  # no episode ended yet
    compared = 0
    for _ in range(40):
        a = torch.randint(0, 2, (cpu.num_envs,), generator=g)
        c, d = cpu.step(a), other.step(to_other(a))
        d = [x.cpu() for x in d]
        assert torch.equal(c[2][fresh], d[2][fresh]) and torch.equal(c[3][fresh], d[3][fresh])
        live = fresh & ~(c[2] | c[3])
        assert torch.allclose(c[0][live], d[0][live], atol=1e-5)
        compared += int(live.sum())
        fresh = live
    assert 0 < fresh.sum() < cpu.num_envs and compared > 10 * cpu.num_envs  # both cases were met


def test_dense_auto_reset_keeps_the_dynamics():
    """The sync-free (dense) auto-reset that CUDA uses, exercised on the CPU."""
    dense = BatchedCartPole(256, dtype="float64")
    dense.sync_free_reset = True
    _same_dynamics(BatchedCartPole(256, dtype="float64"), dense, lambda t: t.clone())


@pytest.mark.gpu
def test_cartpole_on_cuda_matches_cpu_dynamics():
    cuda = BatchedCartPole(256, device="cuda", dtype="float64")
    assert cuda.device == torch.device("cuda", torch.cuda.current_device())  # "cuda" names one device
    _same_dynamics(BatchedCartPole(256, dtype="float64"), cuda, lambda t: t.cuda())


# ------------------------------------------------------------------------------ the numpy adapter


def test_make_vector_env_gives_a_numpy_torch_vector_env():
    venv = make_vector_env("batched-cartpole", {}, 64, 0)
    assert isinstance(venv, TorchVectorEnv) and venv.num_envs == 64 and venv.num_rows == 64
    assert venv.agents == ("agent",) and venv.action_space == gym.spaces.Discrete(2)
    obs = venv.reset(seed=7)
    assert isinstance(obs, np.ndarray) and obs.shape == (64, 4) and obs.dtype == np.float32
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(100):
        step = venv.step(rng.integers(0, 2, (64,)))
        assert isinstance(step, VectorStep)
        assert step.obs.shape == (64, 4) and step.reward.dtype == np.float32
        assert step.terminated.dtype == np.bool_ and step.truncated.dtype == np.bool_
        ended += int(step.terminated.sum())
    assert ended > 64
    with pytest.raises(ValueError):
        venv.step(np.zeros(63, dtype=np.int64))
    venv.close()


def test_registered_factories_and_spaces():
    for name in ("batched-cartpole", "batched-pendulum", "batched-spread"):
        assert name in registry.envs
    agents, obs_space, act_space = describe_spaces("batched-spread", {"num_agents": 2})
    assert agents == ("agent_0", "agent_1") and obs_space.shape == (4 + 4 + 2,) and act_space.n == 5
    venv = make_vector_env("batched-pendulum", {"dtype": "float64", "max_episode_steps": 7}, 3, 6)
    assert venv.env_index_offset == 6 and venv.env.dtype == torch.float64 and venv.env.max_episode_steps == 7
    venv.reset(0)
    for _ in range(7):
        step = venv.step(np.zeros((3, 1), np.float32))
    assert step.truncated.all() and step.obs.dtype == np.float32
    spread = make_vector_env("batched-spread", {}, 4, 0)
    assert spread.reset(0).shape == (12, 14)
    assert spread.step(np.zeros(12, np.int64)).reward.shape == (12,)
    assert isinstance(make_batched_env("batched-cartpole", 2), BatchedCartPole)
    with pytest.raises(registry.UnknownNameError):
        make_batched_env("batched-nothing", 2)


def test_actor_workers_train_on_a_batched_env_with_the_inline_launcher(run_dir):
    """The adapter in the ordinary dataflow: actor -> policy -> trainer, inline launcher."""
    import json

    from srl.config.load import load_config
    from srl.launch.run import run_experiment

    config = load_config(
        "cartpole-ppo",
        [
            "launch.launcher=inline",
            "env=batched-cartpole",
            "modules=srl.envs.batched",
            "dataflow.envs_per_actor=64",
            "dataflow.sample_length=8",
            "stop.total_env_steps=4096",
            "stop.target_return=null",
            "monitor.display=off",
            f"run.run_dir={run_dir}",
        ],
    )
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] >= 4096 and summary["stop_reason"].startswith("total_env_steps"), summary
