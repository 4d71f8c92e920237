"""cartpole-ppo to 475 on a two-node Ray cluster (ray.cluster_utils.Cluster, one machine),
actors and policy workers on one node, trainer and parameter service on the other, every
stream over tcp. Prints one JSON line: the run's stop reason, return, env steps, wall time and
which node each worker ran on.

    python benchmarks/ray_two_nodes.py [--seed 1] [--transport tcp|shm]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--transport", choices=["tcp", "shm"], default="tcp")
    parser.add_argument("--timeout-s", type=float, default=1800)
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"node_a": 4}})
    cluster.add_node(num_cpus=2, resources={"node_b": 4})
    run_dir = Path(tempfile.mkdtemp(prefix="srl-two-nodes-")) / "run"
    command = [
        sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "launch.launcher=ray", f"launch.ray_address={cluster.address}",
        f"dataflow.transport={args.transport}", "dataflow.inference=policy_worker", f"run.seed={args.seed}", "stop.target_return=475",
        f"run.run_dir={run_dir}", "monitor.display=off", "launch.heartbeat_timeout_s=120",
        "launch.ray_resources.actor.resources.node_b=1", "launch.ray_resources.policy.resources.node_b=1",
        "launch.ray_resources.trainer.resources.node_a=1", "launch.ray_resources.params.resources.node_a=1",
        "launch.ray_resources.params.num_cpus=0",
    ]  # fmt: skip
    started = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout_s)
    finally:
        cluster.shutdown()
    wall_s = time.monotonic() - started
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else {}
    placement = json.loads((run_dir / "placement.json").read_text()) if (run_dir / "placement.json").exists() else {}
    nodes = {name: where.get("node_id", "?")[:8] for name, where in placement.items()}
    print(json.dumps({
        "benchmark": "ray_two_nodes", "transport": args.transport, "seed": args.seed, "exit_code": proc.returncode,
        "stop_reason": summary.get("stop_reason"), "episode_return_mean": summary.get("episode_return_mean"),
        "env_steps": summary.get("env_steps"), "wall_s": round(wall_s, 1), "nodes": nodes,
        "distinct_nodes": len(set(nodes.values())),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
