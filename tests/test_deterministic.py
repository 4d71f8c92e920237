"""Deterministic mode: same seed, bit-identical parameters, whatever the process timing.

Every worker sleeps a random (unseeded) time before each poll, so the two runs interleave
differently; the hashes must still match, and must match the one-process (inline) run too.
Every stop rule deterministic mode accepts (max_updates, total_env_steps, target_return) stops
after the same update in every run: the trainer decides it (srl.workers.stop); time_limit_s is refused.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_faults import kill_now, kill_the_trainer_once_saved, wait_for_metrics
from test_kernels import FIELDS, ROWS, RecordingAlgorithm, T
from test_shutdown import spawn, srl_command

from srl.config import ConfigError
from srl.config.checks import build_config
from srl.config.load import load_config
from srl.data import columns as C
from srl.launch.monitor import RunMonitor
from srl.monitor.episodes import EpisodeTally
from srl.streams.control import Role
from srl.streams.gradients import GradientGroup
from srl.streams.inline import InlineTransport
from srl.streams.params import SERVICE_IN, ParamPublisher
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.testing.trainer_group import run_trainer_group
from srl.workers.learner import LearnerSettings
from srl.workers.stop import LockStepStop, Stop, StopKind, StopRules
from srl.workers.trainer import TrainerKernel

COMMON = ["run.seed=7", "launch.num_actor_workers=2", "stop.max_updates=12", "monitor.display=off", "stop.target_return=null"]


def params_hash(run_dir, *overrides: str, jitter_s: float = 0.004) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", *COMMON, *overrides, f"run.run_dir={run_dir}",
         f"debug.jitter_max_s={jitter_s}"],
        capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] == 12 and summary["policy_version"] == 12, summary
    return summary["params_sha256"]


@pytest.mark.parametrize(
    "workers",
    [["dataflow.inference=inline"], ["dataflow.inference=policy_worker", "launch.num_policy_workers=2", "dataflow.ring_splits=2"]],
    ids=["inline-inference", "two-policy-workers"],
)
def test_two_deterministic_runs_give_identical_parameters(tmp_path, workers):
    first = params_hash(tmp_path / "a", "run.deterministic=true", *workers)
    second = params_hash(tmp_path / "b", "run.deterministic=true", *workers)
    assert first == second
    inline = params_hash(tmp_path / "c", "run.deterministic=true", "launch.launcher=inline", *workers, jitter_s=0)
    assert inline == first, "the one-process run computes the same parameters"


def test_without_deterministic_mode_timing_changes_the_result(tmp_path):
    """The control: proves the comparison above can fail."""
    workers = ["dataflow.inference=policy_worker", "launch.num_policy_workers=2", "dataflow.ring_splits=2"]
    hashes = {params_hash(tmp_path / f"r{i}", *workers, jitter_s=0.004) for i in range(2)}
    assert len(hashes) == 2


class VersionsInTurn:
    """Parameters whose version is the next of `versions` at each poll (as a ParamSubscriber's)."""

    receivers: list = []

    def __init__(self, *versions: int) -> None:
        self.left, self.version, self.generation = list(versions), -1, 0

    def poll(self, module, waiting_for: int = 0) -> bool:
        self.waiting_for = waiting_for
        if self.left:
            self.version = self.left.pop(0)
        return True


def test_lock_step_counts_versions_from_the_first_and_outside_it_any_version_acts():
    from srl.models.squashed_gaussian import SquashedGaussianMLP
    from srl.streams.inference import Request
    from srl.workers.policy import Acting

    policy = SquashedGaussianMLP(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Box(-1, 1, (1,)), hidden_sizes=[8])
    first, second = Request(0, 0, min_version=1), Request(0, 1, min_version=2)
    lock_step = Acting(policy, VersionsInTurn(40, 41, 41, 42), sampling_seed=1)  # resumed at version 40
    assert lock_step.actionable([first]) == []  # 40: the first it acts with, so version "0"
    assert lock_step.actionable([first, second]) == [first]
    assert lock_step.actionable([second]) == []
    assert lock_step.actionable([second]) == [second]
    assert lock_step.params.waiting_for == 42, "the version it waited for: asked for again when slow"
    # a policy worker started at version 50; the trainer then restarts from its checkpoint at 45
    anytime = Acting(policy, VersionsInTurn(50, 45))
    assert anytime.actionable([Request(0, 0)]) == [Request(0, 0)]
    assert anytime.actionable([Request(0, 0)]) == [Request(0, 0)]


# ------------------------------------------------------------------------------ lock-step stops

README = ["run.deterministic=true", "run.seed=7", "launch.num_actor_workers=2"]  # the README's example
STEPS_PER_UPDATE = 2 * 16 * 32  # cartpole-ppo: 2 actors x 16 envs x 32-step segments, all trained on


def summary_of(run_dir, *overrides: str, jitter_s: float = 0.004, experiment: str = "cartpole-ppo") -> dict:
    """`srl run EXPERIMENT OVERRIDES` (every worker's timing jittered): its summary.json."""
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", experiment, *overrides, f"run.run_dir={run_dir}",
         "monitor.display=off", "monitor.learning_curve=false", f"debug.jitter_max_s={jitter_s}"],
        capture_output=True, text=True, timeout=240, start_new_session=True, check=False,
    )  # fmt: skip  # these take seconds: a hung one fails with its output (pytest-timeout's 600 s shows none)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((run_dir / "summary.json").read_text())


def same_stop(*summaries: dict) -> dict:
    """Every run stopped for the same reason after the same update, with the same parameters."""
    keys = ("stop_reason", "updates", "policy_version", "params_sha256")
    first = summaries[0]
    for other in summaries[1:]:
        assert {k: other[k] for k in keys} == {k: first[k] for k in keys}
    assert first["updates"] == first["policy_version"] and first["params_sha256"]
    return first


def test_the_readme_example_stops_after_the_same_update_in_every_run(tmp_path):
    """total_env_steps counts the env steps the trainer trained on (1024 per update): 6000 is
    reached after update 6 in every run, whichever launcher (local, inline, Ray), however far the
    actors ran ahead. (Two local runs agree in test_two_deterministic_runs_give_identical_parameters;
    here and below a jittered local run meets the inline one, whose order is fixed.)"""
    runs = [summary_of(tmp_path / "local", *README, "stop.total_env_steps=6000")]
    runs.append(summary_of(tmp_path / "inline", *README, "stop.total_env_steps=6000", "launch.launcher=inline", jitter_s=0))
    runs.append(summary_of(tmp_path / "ray", *README, "stop.total_env_steps=6000", "launch.launcher=ray",
                           "launch.heartbeat_timeout_s=120"))  # fmt: skip
    first = same_stop(*runs)
    assert first["stop_reason"] == "total_env_steps 6000 reached"
    assert first["updates"] == -(-6000 // STEPS_PER_UPDATE) == 6


def test_a_reached_target_return_stops_after_the_same_update_in_every_run(tmp_path):
    """The mean of the last 100 episodes that ended in the trained segments: the same episodes,
    in the same order, in every run."""
    target = ["stop.total_env_steps=200000", "stop.target_return=30"]
    runs = [summary_of(tmp_path / "local", *README, *target)]
    runs.append(summary_of(tmp_path / "inline", *README, *target, "launch.launcher=inline", jitter_s=0))
    first = same_stop(*runs)
    assert first["stop_reason"].startswith("target_return 30.0 reached (mean of last 100 episodes: ")
    assert float(first["stop_reason"].rsplit(" ", 1)[1].rstrip(")")) >= 30.0
    assert first["updates"] * STEPS_PER_UPDATE < 200000
    assert first["time_to_target_s"] is not None


def test_a_killed_trainer_ends_a_lock_step_run_at_once_and_run_resume_continues_it(tmp_path):
    """A trainer restarted from its checkpoint publishes an older version than the one the actors
    left running wait for: a lock-step run that restarted it would hang with every worker alive.
    It ends instead, with the failure and how to go on, and run.resume goes on."""
    run_dir = tmp_path / "run"
    proc = spawn(srl_command(
        "run", "cartpole-ppo", *README, "stop.total_env_steps=50000000", "stop.target_return=null",
        "run.checkpoint_interval_s=0.5", f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false",
    ))  # fmt: skip
    saved = kill_the_trainer_once_saved(proc, run_dir, version=3, timeout_s=120)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert "srl: restarted" not in out and "worker trainer:0 failed" in out, out
    assert f"run.deterministic=true restarts no worker (a lock-step run cannot take one back); the run ends here. " \
           f"run.resume={run_dir} continues it from its last checkpoint" in out, out
    resumed = summary_of(run_dir, f"run.resume={run_dir}", f"stop.max_updates={saved + 2}")
    assert resumed["stop_reason"] == f"max_updates {saved + 2} reached", resumed
    assert resumed["policy_version"] >= saved + 2, resumed


def test_a_lock_step_run_in_which_nothing_moves_ends_as_stalled(tmp_path):
    """Every worker reporting, nothing moving: the parameter service stopped (SIGSTOP; the heartbeat
    timeout set far off), so the actors wait for a version that never reaches them. The run ends
    after launch.stall_timeout_s, naming each worker's last version, instead of never."""
    run_dir = tmp_path / "run"
    proc = spawn(srl_command(
        "run", "cartpole-ppo", *README, "stop.total_env_steps=50000000", "stop.target_return=null",
        "launch.stall_timeout_s=3", "launch.heartbeat_timeout_s=600", f"run.run_dir={run_dir}", "monitor.display=off",
        "monitor.learning_curve=false",
    ))  # fmt: skip
    wait_for_metrics(run_dir, proc)
    assert kill_now(proc.pid, ("params",), random.Random(0), sig=signal.SIGSTOP) == "srl:cartpole-ppo:params:0"
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "the run stalled: no env step and no update for 3 s (launch.stall_timeout_s)" in out, out
    assert "actor:1 sent " in out and "trainer:0 holds version " in out and f"run.resume={run_dir}" in out, out
    assert json.loads((run_dir / "summary.json").read_text())["stop_reason"] == "stalled"


def test_two_resumes_of_a_deterministic_run_from_one_checkpoint_give_identical_parameters(tmp_path):
    """A resumed trainer starts at its checkpoint's version, not 0: the lock step counts versions
    from the first one acted with, so the resumed run is in lock step too (it was not: the actors
    asked for versions 1, 2, ... which the resumed weights already passed, and ran ahead)."""
    summary_of(tmp_path / "first", *README, "stop.max_updates=4", "stop.target_return=null")
    hashes = []
    for k, launcher in (("local", "local"), ("inline", "inline")):
        shutil.copytree(tmp_path / "first", tmp_path / k)
        resumed = summary_of(tmp_path / k, f"run.resume={tmp_path / k}", "stop.max_updates=8",
                             f"launch.launcher={launcher}", jitter_s=0.004 if launcher == "local" else 0)  # fmt: skip
        assert resumed["launch"] == 2 and resumed["stop_reason"] == "max_updates 8 reached", resumed
        hashes.append(resumed["params_sha256"])
    assert hashes[0] == hashes[1], hashes


def test_a_lock_step_run_beside_a_policy_that_does_not_train_ends_with_the_same_parameters(tmp_path):
    """A fixed policy's weights never change (version 0 for good): it answers every request, where
    it once waited for version 1 and the run hung."""
    fixed = ["env_kwargs.sides=[learner, opponent]", "policies={learner: {}, opponent: {trainable: false, policy: random-legal}}",
             "policy_mapping={learner: learner, opponent: opponent}", "run.deterministic=true", "run.seed=1",
             "stop.max_updates=5", "stop.target_return=null"]  # fmt: skip
    runs = [summary_of(tmp_path / k, *fixed, experiment="tictactoe-ppo") for k in "ab"]
    first = same_stop(*runs)
    assert first["stop_reason"] == "max_updates 5 reached" and first["policies"]["opponent"]["updates"] == 0


@pytest.mark.parametrize("rule", ["stop.total_env_steps=6000", "stop.target_return=30"])
def test_two_trainers_agree_on_the_stop_update(tmp_path, rule):
    """Each trainer sees only its actors' segments: they count the group's env steps and pool
    their episodes, so both stop after the same update, in every run."""
    digests, runs = [], []
    for k in "ab":
        runs.append(summary_of(tmp_path / k, *README, "launch.num_trainers=2", "stop.total_env_steps=200000", rule,
                               "debug.record_param_digests=true"))  # fmt: skip
        mine = [json.loads((tmp_path / k / "param_digests" / f"trainer-{t}.json").read_text()) for t in (0, 1)]
        assert mine[0] == mine[1], "the trainers took different steps, or stopped after different updates"
        digests.append(mine[0])
    first = same_stop(*runs)
    assert digests[0] == digests[1] and max(map(int, digests[0])) == first["updates"]
    assert first["stop_reason"].startswith(rule.split("=")[0].removeprefix("stop."))
    if rule.startswith("total_env_steps"):
        assert first["updates"] == 6, "the group's env steps: both trainers' shares"


def test_a_deterministic_pod_stops_after_the_same_update_in_every_run(tmp_path):
    """A pod decides too, after each update: in its own process (launcher=local) with jitter."""
    runs = []
    for k in "ab":
        proc = subprocess.run(
            [sys.executable, "-m", "srl.cli", "run", "cartpole-pod", "run.deterministic=true", "run.seed=7",
             "launch.launcher=local", "stop.target_return=60", f"run.run_dir={tmp_path / k}", "monitor.display=off",
             "monitor.learning_curve=false", "debug.jitter_max_s=0.004"],
            capture_output=True, text=True, timeout=300, start_new_session=True, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        runs.append(json.loads((tmp_path / k / "summary.json").read_text()))
    assert same_stop(*runs)["stop_reason"].startswith("target_return 60.0 reached")


def test_time_limit_s_is_refused_before_any_process_starts(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", *README, "stop.time_limit_s=60",
         f"run.run_dir={tmp_path / 'run'}", "monitor.display=off"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and not (tmp_path / "run").exists()
    out = proc.stdout + proc.stderr
    assert "field 'stop.time_limit_s'" in out and "stop.time_limit_s=null" in out and "Traceback" not in out, out
    with pytest.raises(ConfigError, match="time_limit_s"):
        load_config("cartpole-ppo", [*README, "stop.time_limit_s=60"])
    load_config("cartpole-ppo", [*README, "stop.max_updates=10"])  # the rules decided at an update are accepted
    load_config("cartpole-ppo", ["stop.time_limit_s=60"])  # and time_limit_s outside deterministic mode
    with pytest.raises(ConfigError, match="deterministic.*ensemble"):
        load_config("cartpole-pod", ["run.deterministic=true", "pod.ensemble.population=2"])


# ------------------------------------------------------------------------------ the kernels' decision


def test_lock_step_stop_checks_the_monitor_rules_in_its_order_and_keeps_its_reason():
    stop = LockStepStop(StopRules(total_env_steps=100, target_return=5.0, max_updates=3, window=2))
    assert stop.after_update(1, 40, [9.0]) is None, "one episode: the window is not full"
    assert stop.after_update(2, 80, [0.0]) is None, "mean 4.5 < 5"
    assert stop.after_update(3, 120, [2.0, 8.0]) == Stop(StopKind.TARGET, "target_return 5.0 reached (mean of last 2 episodes: 5.00)")
    assert stop.after_update(4, 160, [0.0]) == stop.stop and stop.episodes == 4, "kept, nothing added"
    assert LockStepStop(StopRules(100, None, 3)).after_update(3, 120, []) == Stop(StopKind.MAX_UPDATES, "max_updates 3 reached")
    assert LockStepStop(StopRules(100, None, 4)).after_update(3, 100, []) == Stop(StopKind.TOTAL_ENV_STEPS,
                                                                                  "total_env_steps 100 reached")
    assert LockStepStop(StopRules(100, None, None)).after_update(3, 99, []) is None


def test_episode_tally_ends_episodes_in_step_then_row_order():
    tally = EpisodeTally(rows=4, agents=2)
    rewards = np.array([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]], np.float32)
    dones = np.zeros((3, 4), bool)
    dones[0, 2:] = True  # env 1 (rows 2, 3) ends at step 0
    dones[2, 0] = True  # env 0's first agent is done at step 2, its second is not: no episode yet
    returns, lengths = tally.steps(rewards, dones)
    assert returns == [3.0, 4.0] and lengths == [1, 1]
    assert tally.running_return.tolist() == [3.0, 6.0, 6.0, 8.0]
    single = EpisodeTally(rows=3)
    assert single.step(np.ones(3, np.float32), np.array([False, True, False])) == ([1.0], [1])
    assert single.step(np.ones(3, np.float32), np.array([True, True, True])) == ([2.0, 1.0, 2.0], [2, 1, 2])


def lock_step_trainer(tmp_path, stop):
    """A deterministic TrainerKernel: actors 0 and 1 (one ring group each) own batch places 0, 1."""
    transport, policy = InlineTransport(), torch.nn.Linear(2, 2)
    segs = {(a, 0, k): {n: np.zeros((T + 1, ROWS, *f.shape), f.dtype) for n, f in FIELDS.items()}
            for a in (0, 1) for k in (0, 1)}  # fmt: skip
    producers = [SampleProducer(transport, a, {(0, k): segs[(a, 0, k)] for k in (0, 1)}) for a in (0, 1)]
    transport.receiver(SERVICE_IN)
    kernel = TrainerKernel(
        policy, RecordingAlgorithm(policy), SampleConsumer(transport, segs), ParamPublisher(transport),
        FIELDS, T, batch_segments=2, rows_per_segment=ROWS, num_agents=1,
        settings=LearnerSettings(run_dir=tmp_path, checkpoint_interval_s=3600, max_policy_lag=1),
        splits_per_actor=1, actors=[0, 1], stop=stop,
    )  # fmt: skip
    kernel.start()
    return kernel, producers


def send_steps(producer, version, ends=(), bootstrap_end=False):
    """A segment whose every row earns 1 per step; `ends`: (t, row) where an episode ends.
    `bootstrap_end`: row T (the next segment's row 0, never trained on as a step) claims an end."""
    slot = producer.acquire(0)
    seg = producer.slots[(0, slot)]
    seg[C.REWARD][:], seg[C.TERMINATED][:], seg[C.TRUNCATED][:] = 1.0, False, False
    for t, row in ends:
        seg[C.TERMINATED if t % 2 else C.TRUNCATED][t, row] = True
    if bootstrap_end:
        seg[C.REWARD][T], seg[C.TERMINATED][T] = 100.0, True
    seg[C.POLICY_VERSION][:] = version
    producer.send(0, slot)


def test_trainer_decides_a_target_return_from_the_episodes_it_trained_on(tmp_path):
    """Episodes run on across segments of one actor's place; arrival order does not matter; the
    bootstrap row's step is not counted; once stopped, segments are released untrained."""
    kernel, (a0, a1) = lock_step_trainer(tmp_path, LockStepStop(StopRules(10**9, target_return=5.0, window=2)))
    send_steps(a1, 0, bootstrap_end=True)  # actor 1 first: its place is fixed anyway
    send_steps(a0, 0, ends=[(T - 1, 0)])  # actor 0, row 0: an episode of T = 4 steps
    assert kernel.poll() and kernel.version == 1
    assert kernel.report()["stop_reason"] is None, "one episode (4.0): 100 at the bootstrap row is no step"
    send_steps(a1, 1, ends=[(1, 2)])  # actor 1, row 2: 4 steps in its first segment + 2 = 6
    send_steps(a1, 1)  # actor 1's next segment waits: its place in this batch is taken
    assert kernel.poll() and kernel.version == 1
    send_steps(a0, 1)
    kernel.poll()
    assert kernel.version == 2 and kernel.report()["stop_reason"] == (
        "target_return 5.0 reached (mean of last 2 episodes: 5.00)")  # fmt: skip
    send_steps(a0, 2, ends=[(0, 1)])
    kernel.poll()
    assert kernel.version == 2 and len(kernel.algorithm.batches) == 2, "no update after the stop"
    assert all(p.acquire(0) is not None for p in (a0, a1)), "segments after the stop are released"
    assert kernel.finish()["stop_reason"].startswith("target_return")


def test_trainer_stops_at_the_first_update_whose_trained_steps_reach_total_env_steps(tmp_path):
    per_update = T * 2 * ROWS  # 24
    kernel, (a0, a1) = lock_step_trainer(tmp_path, LockStepStop(StopRules(total_env_steps=2 * per_update + 1)))
    for version in range(4):
        send_steps(a0, version)
        send_steps(a1, version)
        kernel.poll()
        reason = kernel.report()["stop_reason"]
        assert reason == (None if version < 2 else f"total_env_steps {2 * per_update + 1} reached")
    assert kernel.version == 3 and kernel.trained_env_steps == 3 * per_update


def test_monitor_of_a_deterministic_run_stops_only_when_the_trainer_says_so():
    m = RunMonitor(build_config({"experiment": "m", "deterministic": True, "total_env_steps": 1000,
                                 "target_return": 50.0}))  # fmt: skip
    m.on_report(Role.ACTOR, 0, {"env_steps": 5000, "episode_returns": [60.0] * 100, "episode_lengths": [1] * 100})
    trainer = {"updates": 3, "segments_dropped": 0, "policy_version": 3, "stop_reason": None}
    m.on_report(Role.TRAINER, 0, trainer)
    assert m.stop() is None, "the actors' reports run ahead of what the trainer trained on"
    m.on_report(Role.TRAINER, 0, {**trainer, "updates": 1, "stop_reason": "target_return 50.0 reached (...)",
                                  "stop_kind": "target_return"})
    assert m.stop() == Stop(StopKind.TARGET, "target_return 50.0 reached (...)") and m.target_reached_s >= 0


def _gather(rank: int, address) -> list[float]:
    group = GradientGroup(address, rank, generation=0, device=torch.device("cpu"), timeout_s=60)
    try:
        return group.gather([float(rank)] * (rank + 1), capacity=3)
    finally:
        group.close()


def test_a_trainer_group_gathers_every_members_episodes_rank_by_rank():
    results = run_trainer_group(_gather)
    assert results == {0: [0.0, 1.0, 1.0], 1: [0.0, 1.0, 1.0]}
