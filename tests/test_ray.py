"""launch.launcher=ray: CartPole to 475 on a local Ray instance through an actor kill, workers pinned
to two nodes of a Ray test cluster by custom resources, tcp streams between the nodes, a pod
ensemble whose members are Ray actors, a user's own module (modules=) reaching the workers of a
local instance and of a cluster, and requests Ray cannot grant, refused or ending the run with one
message.

Each run is its own `srl run` process: a Ray driver leaves threads behind after ray.shutdown(),
and they must not live on in the test process."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import ray
from test_custom_docs import doc_module_code, srl_env, srl_script
from test_faults import kill_now
from test_shutdown import spawn, srl_command

from srl.config import ConfigError
from srl.config.checks import build_config

SLOW_START = ["launch.heartbeat_timeout_s=120"]  # a Ray worker process may take a while to start on a busy machine


RUN_TIMEOUT_S = 900


def run_srl(*args: str) -> tuple[int, str]:
    """`srl run ARGS` in a process of its own session; its exit code and output."""
    return finish(spawn(srl_command("run", *args, "monitor.display=off", *SLOW_START)))


def finish(proc) -> tuple[int, str]:
    try:
        output, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    return proc.returncode, output


def assert_ran_to(proc, run_dir: Path, env_steps: int) -> None:
    """`proc`'s run ended with 0, no error, and at least `env_steps` env steps."""
    code, output = finish(proc)
    assert code == 0, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["env_steps"] >= env_steps, summary


def kill_once_training(run_dir, role: str, killed: list[str], root_pid: int) -> threading.Thread:
    def killer() -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            path = run_dir / "metrics.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            if lines and json.loads(lines[-1])["env_steps"] > 0:
                break
            time.sleep(0.2)
        title = kill_now(root_pid, (role,), random.Random(0))
        killed.append(title)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


def test_cartpole_ppo_on_ray_reaches_475_through_an_actor_kill(run_dir):
    proc = spawn(srl_command(
        "run", "cartpole-ppo", "launch.launcher=ray", "run.seed=1", "stop.total_env_steps=400000", f"run.run_dir={run_dir}",
        "monitor.display=off", *SLOW_START,
    ))  # fmt: skip
    killed: list[str] = []
    thread = kill_once_training(run_dir, "actor", killed, proc.pid)
    code, output = finish(proc)
    assert code == 0, output
    thread.join()
    assert killed == ["srl:cartpole-ppo:actor:0"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= 475, summary
    assert summary["restarts"] == {"actor:0": 1}, summary
    placement = json.loads((run_dir / "placement.json").read_text())
    assert sorted(placement) == ["actor:0", "params:0", "trainer:0"]


@pytest.fixture
def two_nodes():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"node_a": 4}})
    cluster.add_node(num_cpus=2, resources={"node_b": 4})
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_workers_pinned_to_two_nodes_by_custom_resources_reach_475(run_dir, two_nodes):
    """The issue's two-node run (benchmarks/ray_two_nodes.py): actor and policy worker on one
    node, trainer and parameter service on the other, every stream over tcp, to 475."""
    code, output = run_srl(
        "cartpole-ppo", "launch.launcher=ray", f"launch.ray_address={two_nodes.address}", "dataflow.inference=policy_worker",
        "dataflow.transport=tcp", "run.seed=1", "stop.target_return=475", f"run.run_dir={run_dir}", "monitor.learning_curve=false",
        "launch.ray_resources.actor.resources.node_b=1", "launch.ray_resources.policy.resources.node_b=1",
        "launch.ray_resources.trainer.resources.node_a=1", "launch.ray_resources.params.resources.node_a=1",
        "launch.ray_resources.params.num_cpus=0",
    )  # fmt: skip
    assert code == 0, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return 475"), summary
    placement = json.loads((run_dir / "placement.json").read_text())
    node = {name: where["node_id"] for name, where in placement.items()}
    assert node["actor:0"] == node["policy:0"] != node["trainer:0"] == node["params:0"], node


def test_the_srl_script_run_where_a_users_module_is_gives_it_to_local_ray_workers(tmp_path, run_dir):
    """docs/custom.md's command with launch.launcher=ray, by the console script (no current directory on
    its sys.path) in a directory holding only my_rl.py: the controller and the workers import it."""
    (tmp_path / "my_rl.py").write_text(doc_module_code())
    proc = subprocess.Popen(
        [srl_script(), "run", "sign-a2c", "modules=my_rl", "launch.launcher=ray", "stop.total_env_steps=3000",
         "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off", *SLOW_START],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=srl_env(), cwd=tmp_path,
        start_new_session=True,
    )  # fmt: skip
    assert_ran_to(proc, run_dir, env_steps=3000)


def test_a_users_own_module_is_uploaded_to_the_workers_of_a_cluster(tmp_path, run_dir, two_nodes):
    """docs/custom.md's my_rl, which the driver finds on its PYTHONPATH: the cluster's nodes have
    neither that PYTHONPATH nor the module in the driver's current directory, so the workers on
    both nodes get it only as Ray's upload of the job's py_modules."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my_rl.py").write_text(doc_module_code())
    (tmp_path / "cwd").mkdir()
    env = srl_env()
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "mine")
    proc = subprocess.Popen(
        [sys.executable, "-m", "srl.cli", "run", "sign-a2c", "modules=my_rl", "launch.launcher=ray",
         f"launch.ray_address={two_nodes.address}", "stop.total_env_steps=3000", "stop.target_return=null", f"run.run_dir={run_dir}",
         "launch.ray_resources.actor.resources.node_b=1", "launch.ray_resources.trainer.resources.node_a=1",
         "monitor.display=off", *SLOW_START],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path / "cwd",
        start_new_session=True,
    )  # fmt: skip
    assert_ran_to(proc, run_dir, env_steps=3000)
    placement = json.loads((run_dir / "placement.json").read_text())
    node = {name: where["node_id"] for name, where in placement.items()}
    assert node["actor:0"] == node["actor:1"] != node["trainer:0"], node


def test_a_request_no_node_can_meet_is_refused_before_any_worker_starts(run_dir):
    code, output = run_srl("cartpole-ppo", "launch.launcher=ray", f"run.run_dir={run_dir}", "launch.ray_resources.trainer.resources.no_such_node=1")
    assert code == 2, output  # a config error, not a failed run
    line = re.search(r"srl: worker trainer:0 asks Ray for num_cpus=1, num_gpus=0, memory=none, custom resources "
                     r"\{no_such_node: 1\} \(ray_resources.trainer\), which no node has .*; "
                     r"the cluster has in total: CPU \d+.*; free now: CPU \d+", output)  # fmt: skip
    assert line, output
    assert "Traceback" not in output, output
    assert not (run_dir / "placement.json").exists() and not (run_dir / "summary.json").exists()


@pytest.mark.parametrize("experiment, role, two", [
    ("cartpole-ppo", "actor", "launch.num_actor_workers=2"), ("cartpole-pod-ensemble", "pod", "pod.ensemble.population=2"),
])  # fmt: skip
def test_two_workers_wanting_the_only_node_b_end_the_run_naming_it(run_dir, monkeypatch, experiment, role, two):
    """The issue's run: the local Ray instance has one unit of node_b (Ray's RAY_OVERRIDE_RESOURCES
    gives it custom resources) and two workers each want it. Each would fit alone, so Ray just
    waits; the run ends after ray_placement_timeout_s naming the worker left waiting. No target:
    CartPole could be solved by the one placed worker before that (a pod does it in seconds)."""
    monkeypatch.setenv("RAY_OVERRIDE_RESOURCES", json.dumps({"node_b": 1}))
    code, output = run_srl(
        experiment, "launch.launcher=ray", f"run.run_dir={run_dir}", "run.seed=1", "monitor.learning_curve=false", "stop.target_return=null",
        "stop.time_limit_s=60", f"ray_resources.{role}.resources.node_b=1", two, "launch.ray_placement_timeout_s=5",
    )  # fmt: skip
    assert code == 1, output
    text = " ".join(output.split())  # the console wraps long lines
    message = (rf"run failed: worker ({role}:[01]) failed: Ray could not place it within launch.ray_placement_timeout_s=5 s: "
               r"it asks for num_cpus=1, num_gpus=0, memory=none, custom resources \{node_b: 1\} "
               rf"\(ray_resources.{role}\); the cluster has in total: CPU \d+, .*node_b 1; free now: .*node_b 0")  # fmt: skip
    found = re.search(message, text)
    assert found, output
    assert text.count("Ray could not place") == 1 and "Traceback" not in output, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "worker failed" and "node_b" in summary["error"], summary
    placement = json.loads((run_dir / "placement.json").read_text())
    assert placement[found.group(1)] == {"error": "not placed"}, placement


def test_ray_resources_name_known_roles():
    with pytest.raises(ConfigError, match="unknown roles \\['learner'\\]"):
        build_config({"experiment": "x", "ray_resources": {"learner": {"num_cpus": 1}}})


def test_tcp_streams_between_two_nodes_train_cartpole_with_two_trainers(run_dir, two_nodes):
    """dataflow.transport=tcp: actors on one node, the trainer group and the parameter service on the other;
    every stream's address found through Ray, nothing shared but the network."""
    code, output = run_srl(
        "cartpole-ppo", "launch.launcher=ray", f"launch.ray_address={two_nodes.address}", "dataflow.transport=tcp", "launch.num_actor_workers=2",
        "launch.num_trainers=2", "run.seed=1", "stop.target_return=150", "stop.total_env_steps=150000", f"run.run_dir={run_dir}",
        "monitor.learning_curve=false",
        "launch.ray_resources.actor.resources.node_b=1", "launch.ray_resources.trainer.resources.node_a=1",
        "launch.ray_resources.params.resources.node_a=1", "launch.ray_resources.params.num_cpus=0",
    )  # fmt: skip
    assert code == 0, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["params_sha256"], "the trainers left their group cleanly and reported"
    placement = json.loads((run_dir / "placement.json").read_text())
    node = {name: where["node_id"] for name, where in placement.items()}
    assert node["actor:0"] == node["actor:1"] != node["trainer:0"] == node["trainer:1"] == node["params:0"], node


def test_pod_ensemble_on_ray_fills_the_leaderboard_and_replaces_a_member(run_dir, capsys):
    """Two pods as Ray actors, scored by greedy evaluations (which jump about early in training,
    unlike training means, where the member reporting later tends to lead just by being later):
    the leaderboard fills, a lagging member becomes a copy of the leader, `srl leaderboard` reads it."""
    from srl.cli import main
    from srl.population import leaderboard

    code, output = run_srl(
        "cartpole-pod-ensemble", "launch.launcher=ray", "run.seed=3", f"run.run_dir={run_dir}", "dataflow.envs_per_actor=16",
        "pod.ensemble.population=2", "pod.ensemble.eval_interval_updates=2", "pod.ensemble.eval_episodes=4",
        "pod.ensemble.ready_evals=1", "stop.max_updates=60", "stop.target_return=null",
    )  # fmt: skip
    assert code == 0, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["error"] is None and summary["stop_reason"].startswith("max_updates"), summary
    table = leaderboard.read(run_dir)
    assert len(table["entries"]) == 5 and len(table["replacements"]) >= 1, table
    kept = sorted(p.name for p in (run_dir / leaderboard.FOLDER).iterdir())
    assert len(kept) == 5  # evicted and unadmitted checkpoints were deleted
    assert sorted(json.loads((run_dir / "placement.json").read_text())) == ["pod:0", "pod:1"]
    assert main(["leaderboard", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "leaderboard: population 2" in out and "replacement(s)" in out
