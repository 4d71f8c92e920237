"""The pod kernel (srl.workers.pod): env, policy and PPO in one process on one device."""

from __future__ import annotations

import math

import pytest
import torch

from srl import checkpoint
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.config.checks import build_config
from srl.config.load import load_config
from srl.data import columns as C
from srl.envs.batched import BatchedCartPole, BatchedSpread
from srl.faults import RunHalted
from srl.launch.monitor import RunMonitor
from srl.models.mlp import ActorCriticMLP
from srl.streams.control import Role
from srl.testing.pod import pod_settings, train_pod
from srl.workers.learner import Learner, LearnerSettings
from srl.workers.pod import PodKernel, make_pod

CARTPOLE_POD = pod_settings(load_config("cartpole-pod", ["run.run_dir=/nonexistent"]))  # what `srl run` trains

BUDGET_ENV_STEPS = 1_000_000


class Recorder(Algorithm):
    """Keeps a copy of every batch and proves autograd can train on it."""

    def __init__(self, policy):
        super().__init__(policy, AlgorithmConfig(), 0)
        self.batches = []

    def step(self, batch, env_steps):
        self.batches.append({k: v.clone() for k, v in batch.items()})
        out = self.policy.analyze(batch[C.OBS][:-1].flatten(0, 1), batch[C.ACTION][:-1].flatten(0, 1))
        out[C.LOG_PROB].sum().backward()  # fails on inference tensors
        self.policy.zero_grad(set_to_none=True)
        return {"losses/fake": float(env_steps)}


def small_pod(env, T=3, seed=0):
    torch.manual_seed(seed)
    policy = ActorCriticMLP(env.observation_space, env.action_space, hidden_sizes=(8,))
    return PodKernel(env, policy, Recorder(policy), sample_length=T, seed=seed)


def test_buffers_are_segments_with_the_bootstrap_row_carried_over():
    env = BatchedCartPole(5, max_episode_steps=4)  # short episodes: truncations inside a rollout
    pod, T = small_pod(env), 3
    pod.start()
    for _ in range(4):
        assert pod.poll()
    batches = pod.algorithm.batches
    assert len(batches) == 4
    for b in batches:
        assert b[C.OBS].shape == (T + 1, 5, 4) and b[C.OBS].dtype == torch.float32
        assert b[C.ACTION].shape == (T + 1, 5) and b[C.ACTION].dtype == torch.int64
        for name in (C.REWARD, C.LOG_PROB, C.VALUE):
            assert b[name].shape == (T + 1, 5) and b[name].dtype == torch.float32
        assert b[C.TERMINATED].dtype == torch.bool and b[C.POLICY_VERSION].dtype == torch.int64
        assert torch.equal(b[C.REWARD][:T], torch.ones(T, 5))  # CartPole pays 1 per step
        assert not (b[C.TERMINATED][:T] & b[C.TRUNCATED][:T]).any()
    for prev, nxt in zip(batches, batches[1:]):  # row T is row 0 of the next rollout
        for name in (C.OBS, C.ACTION, C.LOG_PROB, C.VALUE, C.POLICY_VERSION):
            assert torch.equal(prev[name][T], nxt[name][0]), name
    for k, b in enumerate(batches):
        versions = b[C.POLICY_VERSION]
        assert (versions[1:] == k).all()
        assert (versions[0] == max(k - 1, 0)).all()
    # time limit 4: every env is truncated (or terminated) at least once in 12 steps
    done = torch.cat([b[C.TERMINATED][:T] | b[C.TRUNCATED][:T] for b in batches])
    assert done.any(dim=0).all()
    report = pod.report()
    assert report["env_steps"] == 4 * T * 5 and report["updates"] == 4 and report["policy_version"] == 4
    assert report["policy_lag_mean"] == pytest.approx(1 / T)
    assert report["losses/fake"] == 4 * T * 5
    assert len(report["episode_returns"]) == int(done.sum())
    # CartPole: return == length; none longer than the time limit
    assert report["episode_returns"] == [float(n) for n in report["episode_lengths"]]
    assert all(1 <= n <= 4 for n in report["episode_lengths"])
    assert pod.report()["episode_returns"] == []  # reset by report()


def test_stored_log_probs_are_the_acting_policys():
    env = BatchedCartPole(16)
    pod = small_pod(env, T=4, seed=3)
    pod.start()
    pod.poll()
    b = pod.algorithm.batches[0]
    with torch.no_grad():  # the Recorder did not change the weights
        out = pod.policy.analyze(b[C.OBS].flatten(0, 1), b[C.ACTION].flatten(0, 1))
    assert torch.allclose(out[C.LOG_PROB], b[C.LOG_PROB].flatten(), atol=1e-5)
    assert torch.allclose(out[C.VALUE], b[C.VALUE].flatten(), atol=1e-5)


def test_multi_agent_episode_accounting():
    env = BatchedSpread(3, num_agents=2)  # 25-step episodes, 6 rows
    pod = small_pod(env, T=10)
    pod.start()
    for _ in range(6):  # 60 steps: two full episodes per env
        pod.poll()
    report = pod.report()
    assert report["env_steps"] == 60 * 3
    assert report["episode_lengths"] == [25] * 12
    returns = report["episode_returns"]
    assert all(r < 0 for r in returns)
    assert returns[0::2] == returns[1::2]  # the two agents of an env share the reward


def test_report_feeds_the_run_monitor_as_actor_and_trainer():
    run = train_pod(total_env_steps=4096, seed=2, **{**CARTPOLE_POD, "num_envs": 64})
    assert not run.reached and run.env_steps >= 4096
    final = run.final
    assert len(final["params_sha256"]) == 64
    assert final["params_sha256"] == checkpoint.params_sha256(run.kernel.policy)
    monitor = RunMonitor(build_config({"experiment": "pod", "total_env_steps": 10_000}))
    payload = {**final, "env_steps": 1024, "episodes": 2, "episode_returns": [10.0, 20.0], "episode_lengths": [10, 20]}
    monitor.on_report(Role.ACTOR, 0, payload)
    monitor.on_report(Role.TRAINER, 0, payload, final=True)
    metrics = monitor.metrics()
    assert metrics["env_steps"] == 1024 and metrics["episode_return_mean"] == 15.0
    assert metrics["policy_version"] == run.kernel.version and "losses/policy_loss" in metrics


def test_pendulum_box_actions_and_checkpoints(tmp_path):
    kernel = make_pod(
        "batched-pendulum", num_envs=32, sample_length=8, algo={"epochs": 1}, seed=0,
        settings=LearnerSettings(run_dir=tmp_path),
    )
    kernel.start()
    for _ in range(3):
        kernel.poll()
    assert kernel.buffers[C.ACTION].shape == (9, 32, 1)
    final = kernel.finish()
    assert final["updates"] == 3 and all(math.isfinite(final[k]) for k in final if k.startswith("losses/"))
    meta = checkpoint.latest_meta(tmp_path)
    assert meta["version"] == 3 and meta["env_steps"] == 3 * 8 * 32
    resumed = make_pod(
        "batched-pendulum", num_envs=32, sample_length=8, seed=5, settings=LearnerSettings(run_dir=tmp_path, resume=True)
    )
    assert resumed.version == 3 and checkpoint.params_sha256(resumed.policy) == final["params_sha256"]


def test_a_pod_checkpoints_and_resumes_through_the_learners_code(tmp_path, capfd):
    """A pod is a Learner (srl.workers.learner): a plain Learner resumes from the pod's
    checkpoint and writes one the trainers' way; a pod resumes from that, says so as a trainer
    does, and carries its version and env steps on into its device counters."""
    settings = LearnerSettings(run_dir=tmp_path, run_id="run-a")
    first = make_pod("batched-cartpole", num_envs=8, sample_length=4, seed=0, settings=settings)
    first.start()
    first.poll()
    first.poll()
    first.finish()
    assert checkpoint.latest_meta(tmp_path)["version"] == 2
    other = make_pod("batched-cartpole", num_envs=8, sample_length=4, seed=3)
    learner = Learner(other.policy, other.algorithm, LearnerSettings(run_dir=tmp_path, resume=True, run_id="run-a"))
    assert (learner.version, learner.trained_env_steps) == (2, 2 * 4 * 8)
    with torch.no_grad():
        next(learner.policy.parameters()).add_(1.0)
    learner.version, learner.trained_env_steps = 5, 1000
    learner.save_checkpoint()
    capfd.readouterr()
    resumed = make_pod("batched-cartpole", num_envs=8, sample_length=4, seed=7,
                       settings=LearnerSettings(run_dir=tmp_path, resume=True, run_id="run-a"))
    assert "srl: pod resumed from checkpoint version 5" in capfd.readouterr().err
    assert checkpoint.params_sha256(resumed.policy) == checkpoint.params_sha256(learner.policy)
    resumed.poll()
    report = resumed.report()
    assert (report["policy_version"], report["trained_env_steps"]) == (6, 1000 + 4 * 8)
    with pytest.raises(RunHalted, match="pod cannot resume"):  # only others' checkpoints there
        make_pod("batched-cartpole", num_envs=8, sample_length=4,
                 settings=LearnerSettings(run_dir=tmp_path, resume=True, run_id="run-b"))


def test_policy_must_live_on_the_env_device():
    env = BatchedCartPole(4)
    policy = ActorCriticMLP(env.observation_space, env.action_space).to("meta")
    with pytest.raises(ValueError, match="meta"):
        PodKernel(env, policy, Recorder(policy), sample_length=2)
    with pytest.raises(ValueError, match="sample_length"):
        small_pod(env, T=0)


def test_pod_solves_batched_cartpole():
    """Mean return of the last 100 finished episodes >= 475 within a fixed env-step budget."""
    run = train_pod(total_env_steps=BUDGET_ENV_STEPS, target_return=475.0, seed=1, **CARTPOLE_POD)
    print(f"pod: {run.summary()}")
    assert run.reached, run.summary()
    assert run.return_mean >= 475 and run.episodes >= 100
