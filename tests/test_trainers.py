"""num_trainers > 1: trainers of one policy as a torch.distributed group (srl.streams.gradients).

- two gloo trainers, each stepping PPO on half of a batch, keep identical parameters after every
  step and end where one trainer stepping on the whole batch ends;
- with the local launcher, two trainers fed by their own actors record the same parameter hash
  after every update, and CartPole learns with them;
- the config refuses what a group cannot do, naming the field.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import gymnasium as gym
import pytest
import torch
from test_faults import kill_now
from test_ppo import OBS_SPACE, make_batch

from srl.algos import PPO, PPOConfig
from srl.checkpoint import params_sha256
from srl.config import ConfigError
from srl.config.load import load_config
from srl.launch.run import run_experiment
from srl.models import ActorCriticMLP
from srl.streams.gradients import GradientGroup
from srl.testing.trainer_group import run_trainer_group

STEPS = 4
ROWS = 8
# no per-minibatch advantage statistics: each trainer's mean loss over its half then averages to
# the mean loss over the whole batch, so the two setups take the same steps
ACTIONS = gym.spaces.Discrete(2)
EXACT = PPOConfig(epochs=3, num_minibatches=1, normalize_advantage=False, anneal_lr=False)


def _batch() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return make_batch(ActorCriticMLP(OBS_SPACE, ACTIONS), rows=ROWS)


def _trainer(rank: int, address) -> tuple[list[str], list]:
    batch = _batch()
    mine = {k: v[:, rank * ROWS // 2 : (rank + 1) * ROWS // 2] for k, v in batch.items()}
    torch.manual_seed(100 + rank)  # different initial weights: joining the group makes them rank 0's
    policy = ActorCriticMLP(OBS_SPACE, ACTIONS)
    group = GradientGroup(address, rank, generation=0, device=torch.device("cpu"), timeout_s=60)
    try:
        group.attach(policy)
        ppo = PPO(policy, EXACT, total_env_steps=1000)
        digests = [params_sha256(policy)]
        for _ in range(STEPS):
            ppo.step(mine, env_steps=0)
            digests.append(params_sha256(policy))
        return digests, [p.detach().numpy().copy() for p in policy.parameters()]
    finally:
        group.close()


def test_two_trainers_on_halves_step_like_one_trainer_on_the_whole_batch():
    results = run_trainer_group(_trainer)
    assert results[0][0] == results[1][0], "parameters differ between trainers after some step"
    assert len(set(results[0][0])) == STEPS + 1, "every step changes the parameters"

    batch = _batch()
    torch.manual_seed(100)  # rank 0's initial weights
    policy = ActorCriticMLP(OBS_SPACE, ACTIONS)
    assert params_sha256(policy) == results[0][0][0]
    ppo = PPO(policy, EXACT, total_env_steps=1000)
    for _ in range(STEPS):
        ppo.step(batch, env_steps=0)
    for mine, theirs in zip(policy.parameters(), results[0][1]):
        assert torch.allclose(mine.detach(), torch.from_numpy(theirs), atol=1e-5, rtol=1e-4)


def test_cartpole_learns_with_two_trainers_that_hold_the_same_parameters_after_every_update(run_dir):
    """One launch for both: the two trainers' parameter digests agree after every update of a run
    that learns to 300 (test_rendezvous checks them on 8 updates over shm and tcp)."""
    config = load_config("cartpole-ppo", [
        "debug.record_param_digests=true",
        "launch.num_trainers=2", "launch.num_actor_workers=2", "run.seed=1", "stop.target_return=300", "stop.total_env_steps=200000",
        f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false",
    ])  # fmt: skip
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= 300
    assert summary["params_sha256"], "trainer 0 made its final report: no trainer was left in a collective"
    digests = [json.loads((run_dir / "param_digests" / f"trainer-{t}.json").read_text()) for t in (0, 1)]
    updates = summary["updates"]
    assert sorted(digests[0], key=int) == [str(v) for v in range(1, updates + 1)], "trainer 0 counts the group's updates"
    assert digests[0] == digests[1]
    assert summary["policy_version"] == updates and summary["params_sha256"] == digests[0][str(updates)]


@pytest.mark.parametrize("overrides, message", [
    (["launch.num_actor_workers=3"], r"'launch.num_trainers': 2 must divide launch.num_actor_workers \(3\)"),
    (["launch.launcher=inline"], "'launch.num_trainers': 2 needs one process per trainer"),
    (["replay={}", "algorithm=dqn"], "'launch.num_trainers': 2 cannot run with replay"),
])  # fmt: skip
def test_config_refuses_what_a_trainer_group_cannot_do(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("cartpole-ppo", ["launch.num_trainers=2", "launch.num_actor_workers=2", *overrides])


def test_a_killed_trainer_restarts_its_whole_group_from_the_checkpoint(run_dir):
    config = load_config("cartpole-ppo", [
        "launch.num_trainers=2", "launch.num_actor_workers=2", "stop.max_updates=30", "run.checkpoint_interval_s=0.5",
        f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false",
    ])  # fmt: skip
    killed: list[str] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list((run_dir / "checkpoints").glob("*")):
            time.sleep(0.2)
        title = kill_now(os.getpid(), ("trainer",), random.Random(1))
        killed.append(str(title))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    assert run_experiment(config) == 0
    thread.join()
    assert killed and killed[0].startswith("srl:cartpole-ppo:trainer:"), killed
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts"] == {"trainer:0": 1, "trainer:1": 1}, summary
    assert summary["stop_reason"] == "max_updates 30 reached", summary


def test_deterministic_runs_with_two_trainers_end_with_the_same_parameters(tmp_path):
    """Lock step per trainer (each takes one segment from each of its actors' ring groups), and
    the group's averaged steps: the same seed gives the same parameters."""
    hashes = []
    for k in range(2):
        config = load_config("cartpole-ppo", [
            "launch.num_trainers=2", "launch.num_actor_workers=2", "run.deterministic=true", "run.seed=3", "stop.max_updates=6",
            f"run.run_dir={tmp_path / str(k)}", "monitor.display=off", "monitor.learning_curve=false",
        ])  # fmt: skip
        assert config.dataflow.batch_segments == 1, "each trainer's share: one segment per ring group of its actor"
        assert run_experiment(config) == 0
        hashes.append(json.loads((tmp_path / str(k) / "summary.json").read_text())["params_sha256"])
    assert hashes[0] and hashes[0] == hashes[1]
