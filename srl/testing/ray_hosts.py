"""A Ray cluster on a cluster of namespace hosts (srl.testing.hosts), started with Ray's own CLI:
the head on the first host, a raylet on each other one, each `ray start --block` a child process
the hosts cluster records (so its `down` stops them, and every process Ray starts inside those
namespaces, by pid: never `ray stop`).

    with hosts_up(3) as cluster:
        ray = RayHosts(cluster, resources={"a": {"host_a": 4}, "b": {"host_b": 4}, "c": {"host_c": 4}})
        ray.start()                                            # returns once every node has joined
        cluster.spawn("a", [sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "launch.launcher=ray",
                            f"launch.ray_address={ray.address}", "dataflow.transport=tcp", ...], env=ray.env)

Each node gets `num_cpus` CPUs and a small object store (srl passes arrays over its own streams,
not through Ray's objects), so three fit on a 2-core machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from srl.testing.hosts import Cluster, HostsError

GCS_PORT = 6379  # each host has its own ports: Ray's defaults do not collide with anyone's
OBJECT_STORE_BYTES = 100 * 2**20  # Ray's floor is 75 MiB
JOIN_TIMEOUT_S = 120.0  # every node registered with the head (a busy machine starts Ray slowly)

# A node killed with its host stays "Alive" in the head's view until the head notices, so a count
# alone can be met by the dead node while its restart has not joined (seen in CI: the next test's
# run found no node with host_c). Each resource in argv[4] must also run a task: that needs a live
# node carrying it.
WAIT_FOR_NODES = """
import json, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR")
want, deadline = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
probes = json.loads(sys.argv[4]) if len(sys.argv) > 4 else []
while time.monotonic() < deadline:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= want:
        break
    time.sleep(0.5)
else:
    sys.exit(f"{len(alive)} of {want} Ray nodes joined")
ping = ray.remote(num_cpus=0)(lambda: ray.get_runtime_context().get_node_id())
for name in probes:
    try:
        ray.get(ping.options(resources={name: 0.001}).remote(), timeout=max(deadline - time.monotonic(), 1.0))
    except Exception as e:
        sys.exit(f"no live node ran a task needing {name}: {type(e).__name__}: {e}")
print(len(alive))
"""


def workers_on(cluster: Cluster, label: str) -> list[str]:
    """srl workers running on host `label`, by title ("actor:1"): where Ray placed them now."""
    titles = []
    for pid in cluster.pids(label):
        with contextlib.suppress(psutil.Error, IndexError):
            title = psutil.Process(pid).cmdline()[0]
            if title.startswith("srl:"):
                titles.append(":".join(title.split(":")[2:]))
    return sorted(titles)


def ray_command() -> list[str]:
    """Ray's CLI, from the environment this Python runs in."""
    script = Path(sys.executable).with_name("ray")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


class RayHosts:
    """One Ray node per host of `cluster`: the head on the first host."""

    def __init__(self, cluster: Cluster, resources: dict[str, dict[str, float]] | None = None, num_cpus: int = 2,
                 object_store_bytes: int = OBJECT_STORE_BYTES, env: dict[str, str] | None = None,
                 private: dict[str, str] | None = None) -> None:  # fmt: skip
        """`private`: host label -> a folder that host sees empty and its own (a tmpfs mounted over
        it in a mount namespace of its node's processes): a disk it does not share with the others."""
        self.cluster, self.num_cpus, self.object_store_bytes = cluster, num_cpus, object_store_bytes
        self.private = private or {}
        self.resources = resources or {h.label: {f"host_{h.label}": 4} for h in cluster.hosts}
        # HOME is the cluster's folder: Ray reads ~/.ray (an auth token `ray get-auth-token
        # --generate` left there makes a cluster started without it refuse every client), and
        # another Ray user of this machine must not change this cluster. Run its drivers with `env`.
        assert cluster.workdir is not None
        self.env = {**(os.environ if env is None else env), "HOME": cluster.workdir, "RAY_USAGE_STATS_ENABLED": "0"}
        self.head = cluster.hosts[0]
        self.address = f"{self.head.address}:{GCS_PORT}"
        self.nodes: dict[str, subprocess.Popen] = {}  # host label -> its `ray start --block`

    def start(self, timeout_s: float = JOIN_TIMEOUT_S) -> RayHosts:
        for host in self.cluster.hosts:
            self.start_node(host.label)
        self.wait_for_nodes(len(self.cluster.hosts), timeout_s)
        return self

    def start_node(self, label: str) -> None:
        """`ray start --block` on host `label` (the head on the first host), its output in the
        cluster's folder."""
        host = self.cluster.host(label)
        assert self.cluster.workdir is not None
        temp_dir = Path(self.cluster.workdir) / f"ray-{label}"  # short: Ray's socket paths have a length limit
        where = ["--head", f"--port={GCS_PORT}", "--include-dashboard=false"] if host is self.head else [
            f"--address={self.address}"]  # fmt: skip
        argv = [
            *ray_command(), "start", "--block", *where, f"--node-ip-address={host.address}",
            f"--num-cpus={self.num_cpus}", f"--resources={json.dumps(self.resources.get(label, {}))}",
            f"--object-store-memory={self.object_store_bytes}", f"--temp-dir={temp_dir}", "--disable-usage-stats",
        ]  # fmt: skip
        if label in self.private:  # its node and every worker it starts see a folder of their own there
            Path(self.private[label]).mkdir(parents=True, exist_ok=True)
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs tmpfs "$0" && exec "$@"', self.private[label], *argv]  # fmt: skip
        log = open(Path(self.cluster.workdir) / f"ray-start-{label}.log", "ab")  # noqa: SIM115  (the child holds it)
        try:
            self.nodes[label] = self.cluster.spawn(label, argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        finally:
            log.close()

    def wait_for_nodes(self, count: int, timeout_s: float = JOIN_TIMEOUT_S, labels: list[str] | None = None) -> None:
        """Until `count` nodes are alive in the head's view and the hosts `labels` each ran a task on
        their own resource (a restarted host's node has joined; HostsError after `timeout_s`)."""
        probes = json.dumps([name for label in labels or [] for name in self.resources.get(label, {})])
        deadline = time.monotonic() + timeout_s
        while True:  # the head's port may not be open yet: the waiter fails to connect, and is run again
            left_s = deadline - time.monotonic()
            proc = subprocess.run(
                self.cluster.argv_on(self.head.label, [sys.executable, "-c", WAIT_FOR_NODES, self.address, str(count),
                                                       str(max(left_s, 1.0)), probes]),
                capture_output=True, text=True, env=self.env, timeout=left_s + 60,
            )  # fmt: skip
            if proc.returncode == 0:
                return
            if time.monotonic() >= deadline:
                raise HostsError(f"Ray on {self.cluster.name}: {proc.stderr.strip()[-2000:]}\n{self.logs()}")
            time.sleep(1.0)

    def logs(self) -> str:
        assert self.cluster.workdir is not None
        texts = [p.read_text(errors="replace")[-1500:] for p in sorted(Path(self.cluster.workdir).glob("ray-start-*.log"))]
        return "\n".join(texts)

    def alive(self, label: str) -> bool:
        proc = self.nodes.get(label)
        return proc is not None and proc.poll() is None

    def describe(self) -> dict[str, Any]:
        return {"address": self.address, "nodes": {label: proc.pid for label, proc in self.nodes.items()}}


def finish(proc: subprocess.Popen, timeout_s: float) -> tuple[int, str]:
    """Wait for an `srl run` started in its own process group (text output); on a timeout or an
    error, kill the group so nothing it started outlives the caller."""
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, output
