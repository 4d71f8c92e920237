"""A pod's iteration reads nothing back from its device (issue 35): the episodes, counters,
stats, finiteness flags and the update guard stay device tensors, read once per report; the
lock-step stop acts one update late, at the same update in every run."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

from srl.algos.ppo import PPOConfig
from srl.testing.pod import train_pod
from srl.workers.pod import make_pod
from srl.workers.stop import LockStepStop, StopRules

# every way a tensor's value reaches the host from Python
HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "numpy")
SMALL = {"env": "batched-cartpole", "num_envs": 16, "sample_length": 8, "policy_kwargs": {"hidden_sizes": [16]},
         "algo": PPOConfig(epochs=2, num_minibatches=2, lr=0.01, anneal_lr=True), "total_env_steps": 100_000}


@contextlib.contextmanager
def no_host_reads():
    """Every host read of a tensor raises, naming itself."""
    saved = {name: getattr(torch.Tensor, name) for name in HOST_READS}

    def refuse(name):
        def read(self, *args, **kwargs):
            raise AssertionError(f"host read inside a pod iteration: Tensor.{name}")
        return read

    for name in HOST_READS:
        setattr(torch.Tensor, name, refuse(name))
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


def params_of(pod) -> list[torch.Tensor]:
    return [p.detach().clone() for p in pod.policy.parameters()]


def test_pod_iterations_read_nothing_back_until_the_report():
    pod = make_pod(seed=3, **SMALL)
    with no_host_reads():
        for _ in range(12):  # rollouts, episode ends (CartPole's early ones are short), PPO updates
            assert pod.poll()
    report = pod.report()  # the one read
    assert report["updates"] == 12 and report["env_steps"] == 12 * 8 * 16
    assert report["episodes"] > 0 and len(report["episode_returns"]) == min(report["episodes"], 100)
    assert report["episode_returns"] == [float(n) for n in report["episode_lengths"]]  # CartPole: return = length
    assert math.isfinite(report["losses/policy_loss"]) and report["charts/learning_rate"] < 0.01  # annealed
    pod.close()


def test_reads_at_any_interval_give_the_same_run():
    """The reads do not perturb the run: reporting after every poll or once at the end, the same
    episodes and parameters (and a second run with the same seed is the same)."""
    runs = []
    for every in (1, 12, 12):
        pod = make_pod(seed=5, **SMALL)
        returns: list[float] = []
        episodes = 0
        for k in range(12):
            pod.poll()
            if (k + 1) % every == 0:
                r = pod.report()
                returns += r["episode_returns"]
                episodes += r["episodes"]
        runs.append((episodes, returns[-100:], params_of(pod)))
        pod.close()
    for episodes, returns, params in runs[1:]:
        assert episodes == runs[0][0] and returns == runs[0][1]
        assert all(torch.equal(a, b) for a, b in zip(params, runs[0][2]))


def test_an_update_that_leaves_a_nan_is_undone_on_the_device():
    pod = make_pod(seed=2, **SMALL)
    pod.poll()
    adam = pod.algorithm.optimizer
    step, calls = adam.step, []

    def poisoned_step():
        step()
        calls.append(1)
        if len(calls) == 2:  # the second of the update's 4 Adam steps
            next(iter(pod.policy.parameters())).data[0] = float("nan")

    adam.step = poisoned_step
    before = params_of(pod)
    with no_host_reads():
        pod.poll()  # undone on the device: no read of a flag
    assert all(torch.equal(a, b) for a, b in zip(params_of(pod), before))
    report = pod.report()
    assert report["nonfinite_updates_skipped"] == 1 and report["policy_version"] == 1 and report["updates"] == 1
    with no_host_reads():
        pod.poll()  # the next update trains again
    assert pod.report()["policy_version"] == 2
    assert all(torch.isfinite(p).all() for p in pod.policy.parameters())
    pod.close()


def updates_to_decide(stop_kwargs: dict, polls: int = 60) -> int | None:
    """The update after which a LockStepStop fed every update's episodes (read after each poll)
    first has a reason: where a stop acting on time would stop."""
    pod = make_pod(seed=4, **SMALL)
    stop = LockStepStop(StopRules(**stop_kwargs))
    for _ in range(polls):
        pod.poll()
        seen = len(pod.finished_returns)
        pod.sync()
        if stop.after_update(pod.version, pod.trained_env_steps, pod.finished_returns[seen:]):
            return pod.version
    return None


@pytest.mark.parametrize("rule", [{"target_return": 30.0}, {"max_updates": 7}])
def test_the_lock_step_stop_acts_one_update_late_at_the_same_update_in_every_run(rule):
    kwargs = {"total_env_steps": 10**9, **rule}
    on_time = updates_to_decide(kwargs)
    assert on_time is not None
    finals = []
    for _ in range(2):
        stop = LockStepStop(StopRules(**kwargs))
        pod = make_pod(seed=4, **SMALL, stop=stop)
        while pod.poll():  # each poll reads the previous update's summary (queued a poll ago)
            pass
        report = pod.report()
        finals.append((report["policy_version"], stop.reason, params_of(pod)))
        pod.close()
    assert finals[0][0] == on_time + 1, (finals[0][0], on_time)  # one update late
    assert finals[0][1] is not None and finals[0][1].startswith(next(iter(rule)))
    assert finals[1][0] == finals[0][0] and all(torch.equal(a, b) for a, b in zip(finals[1][2], finals[0][2]))


def test_train_pod_lock_step_stops_at_the_target_one_update_late():
    common = {**SMALL, "seed": 4}
    common.pop("total_env_steps")
    late = train_pod(total_env_steps=100_000, target_return=30.0, lock_step=True, report_interval_s=10.0, **common)
    assert late.reached and late.return_mean is not None and late.episodes >= 100
    assert late.updates == updates_to_decide({"total_env_steps": 10**9, "target_return": 30.0}) + 1


@pytest.mark.slow
def test_cartpole_pod_gpu_preset_reaches_475_on_the_cpu_too():
    """The GPU preset's settings learn wherever they run (on the CPU 1,024 envs take ~20-40 s)."""
    from srl.config.load import load_config
    from srl.testing.pod import pod_settings

    settings = pod_settings(load_config("cartpole-pod-gpu", ["run.run_dir=/nonexistent", "pod.device=cpu"]))
    run = train_pod(total_env_steps=3_000_000, target_return=475.0, seed=1, device="cpu", lock_step=True,
                    report_interval_s=1.0, **settings)
    assert run.reached and run.return_mean is not None and run.return_mean >= 475, run.summary()


def test_cuda_graphs_on_without_cuda_is_refused_naming_the_field():
    from srl.config.checks import ConfigError
    from srl.config.load import load_config

    with pytest.raises(ConfigError, match="field 'pod.cuda_graphs'.*allowed: auto"):
        load_config("cartpole-pod", ["pod.cuda_graphs=on"])
    with pytest.raises(ConfigError, match="pod.cuda_graphs"):
        load_config("cartpole-pod", ["pod.cuda_graphs=sometimes"])
    assert load_config("cartpole-pod-gpu", ["pod.cuda_graphs=off"]).pod.cuda_graphs == "off"
    with pytest.raises(ValueError, match="pod.cuda_graphs=on needs a CUDA device"):
        make_pod(**{**SMALL, "cuda_graphs": "on"})
