"""pong-ppo across three namespace hosts against the same run on one host (issue 34, items 2, 3, 6).

A cluster of three hosts (srl.testing.hosts: network namespaces on a bridge, each its own
address), a Ray node on each started with Ray's own CLI (srl.testing.ray_hosts), then `srl run
pong-ppo launch.launcher=ray dataflow.transport=tcp dataflow.inference=policy_worker` from host a
with roles pinned by custom resources:

- `three_hosts`: trainer, parameter service and policy worker on host a, one actor on host b and
  one on host c (each asks for `sim`, which b and c hold one of): every observation crosses a
  link to the policy worker and back as an action, every segment to the trainer;
- `one_host`: the same run with every role on host a (its streams over tcp on a's address, inside
  one network stack).

Each run's env steps/s is measured from its metrics.jsonl over `--window-s` seconds, starting
`--warmup-s` after its first env steps (Ray's actors, torch and the ALE start first); link rates
(tc tbf on both ends of every host's link) are set between runs on the one cluster. The cells are
interleaved over `--repeats` rounds (one_host, unlimited, 1gbit, 100mbit, one_host, ...), and each
cell's median and its ratio to one_host's median are reported.

`--host-loss` instead runs cartpole-ppo to 475 with two actors on hosts b and c and kills every
process of an actor's host (its raylet too) once the run has 5,000 env steps: the time until the
controller restarts the lost actor, until its process runs on a host left, and whether the run
still reaches its target.

`--delays-ms 0.1,1,10` measures added latency instead of rates: the kernel has no netem (nor
iptables), so the cluster's links are TAP pairs joined by a user-space forwarder that delays
every frame (`srl.testing.hosts up --delay-ms`, srl.testing.delay_link), whatever its port: srl's
ports are picked only once Ray has placed the workers. The cells are one_host, three_hosts through
the forwarder with no delay (its own cost, the baseline of the delays), then three_hosts at each
delay between hosts (a round trip takes twice it); the delay is changed between runs on the one
cluster. The links are not rate-limited then.

    python benchmarks/hosts_pong.py                            # root: 4 cells x 3 rounds
    python benchmarks/hosts_pong.py --rates none,1gbit --repeats 1 --window-s 20
    python benchmarks/hosts_pong.py --delays-ms 0.1,1,10 --repeats 2 [--experiment cartpole-ppo]
    python benchmarks/hosts_pong.py --host-loss

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from srl.testing.hosts import hosts_up  # noqa: E402
from srl.testing.ray_hosts import RayHosts, workers_on  # noqa: E402

# `sim`: one actor per host (pong); `spare`: room on b for c's actor too (the host-loss run)
RESOURCES = {"a": {"host_a": 8}, "b": {"host_b": 8, "sim": 1, "spare": 4}, "c": {"host_c": 8, "sim": 1, "spare": 4}}
ON_A = ["trainer", "params", "policy"]
CPUS_PER_NODE = 4  # Ray's count, not the machine's: one_host puts trainer, policy worker and both actors on a
RUN_LIMIT_S = 600  # a run that has not ended by then (its time_limit_s) is stopped and reported


def pong_args(cell: str, args: argparse.Namespace) -> list[str]:
    """The run's overrides: small, for a 2-core machine (two actors of `--envs` envs each)."""
    pinned = [f"launch.ray_resources.{role}.resources.host_a=1" for role in ON_A]
    pinned += ["launch.ray_resources.params.num_cpus=0"]
    pinned += (["launch.ray_resources.actor.resources.host_a=1"] if cell == "one_host"
               else ["launch.ray_resources.actor.resources.sim=1"])  # fmt: skip
    return [
        args.experiment, "dataflow.inference=policy_worker", "launch.num_actor_workers=2",
        f"dataflow.envs_per_actor={args.envs}", "stop.target_return=null", "stop.total_env_steps=100000000",
        f"stop.time_limit_s={RUN_LIMIT_S}", "run.checkpoint_interval_s=100000",
        *pinned,
    ]  # fmt: skip


def srl_run(ray: RayHosts, run_dir: Path, argv: list[str]) -> subprocess.Popen:
    return ray.cluster.spawn("a", [
        sys.executable, "-m", "srl.cli", "run", *argv, "launch.launcher=ray", f"launch.ray_address={ray.address}",
        "dataflow.transport=tcp", "run.seed=1", f"run.run_dir={run_dir}", "monitor.display=off",
        "monitor.learning_curve=false",
    ], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ray.env)  # fmt: skip


class Lines:
    """A run's output, each line with the monotonic time it was read (a thread reads the pipe)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines = proc, []  # type: ignore[var-annotated]
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def finish(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            return self.proc.wait()
        finally:
            self.thread.join(timeout=10)

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def stop_after(proc: subprocess.Popen, metrics: Path, seconds: float) -> None:
    """Ctrl-C the run `seconds` after its first env steps (its startup, Ray's actors, torch and
    the ALE, takes a minute or more on a loaded machine and is not measured)."""
    while proc.poll() is None:
        rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
        started = next((r["time_s"] for r in rows if r.get("env_steps", 0) > 0), None)
        if started is not None and rows[-1]["time_s"] - started >= seconds:
            proc.send_signal(signal.SIGINT)
            return
        time.sleep(0.5)


def window_rate(rows: list[dict[str, Any]], warmup_s: float, window_s: float) -> dict[str, Any]:
    """Env steps/s over [first env steps + warmup_s, + window_s] of metrics.jsonl's rows."""
    started = next((r["time_s"] for r in rows if r.get("env_steps", 0) > 0), None)
    if started is None:
        return {"env_steps_per_s": None, "why": "no env steps"}
    inside = [r for r in rows if started + warmup_s <= r["time_s"] <= started + warmup_s + window_s]
    if len(inside) < 2:
        return {"env_steps_per_s": None, "why": f"{len(inside)} metric rows in the window"}
    first, last = inside[0], inside[-1]
    seconds = last["time_s"] - first["time_s"]
    return {"env_steps_per_s": round((last["env_steps"] - first["env_steps"]) / seconds, 1),
            "window_s": round(seconds, 2), "first_env_steps_s": started}  # fmt: skip


def run_cell(ray: RayHosts, cell: str, rate: str | None, args: argparse.Namespace, work: Path, n: int,
             delay_ms: float | None = None) -> dict:  # fmt: skip
    cluster = ray.cluster
    if delay_ms is not None:  # a cluster made with delaying links: their delay, no rate
        cluster.set_delay(delay_ms)
    else:
        for host in cluster.hosts:  # one_host's streams stay inside host a: its rate would not matter
            cluster.set_rate(host.label, rate if cell != "one_host" else None)
    run_dir = work / f"run{n}-{cell}-{rate}-{delay_ms}"
    before = {h.label: cluster.link_bytes(h.label) for h in cluster.hosts}
    load = os.getloadavg()
    started = time.monotonic()
    lines = Lines(srl_run(ray, run_dir, pong_args(cell, args)))
    stopper = threading.Thread(target=stop_after, daemon=True,
                               args=(lines.proc, run_dir / "metrics.jsonl", args.warmup_s + args.window_s + args.tail_s))
    stopper.start()
    code = lines.finish(RUN_LIMIT_S + 120)
    stopper.join(timeout=10)
    out: dict[str, Any] = {"cell": cell, "rate": rate or "unlimited", "delay_ms": delay_ms, "exit": code,
                           "seconds": round(time.monotonic() - started, 1), "loadavg_at_start": [round(x, 2) for x in load],
                           "link_mb": {h.label: round((cluster.link_bytes(h.label) - before[h.label]) / 1e6, 1)
                                       for h in cluster.hosts}}  # fmt: skip
    metrics = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    out.update(window_rate(rows, args.warmup_s, args.window_s))
    placement = run_dir / "placement.json"
    if placement.exists():
        out["hosts"] = {name: where.get("host") for name, where in json.loads(placement.read_text()).items()}
    if code != 0 or out["env_steps_per_s"] is None:
        out["output_tail"] = lines.text()[-3000:]
    return out


def host_loss(ray: RayHosts, work: Path) -> dict:
    """cartpole-ppo to 475, two actors on b or c (Ray spreads them); at 5,000 env steps every
    process of an actor's host dies."""
    cluster = ray.cluster
    run_dir = work / "host-loss"
    argv = ["cartpole-ppo", "launch.num_actor_workers=2", "launch.ray_resources.actor.resources.spare=1",
            "stop.target_return=475", "launch.ray_resources.trainer.resources.host_a=1",
            "launch.ray_resources.params.resources.host_a=1", "launch.ray_resources.params.num_cpus=0"]  # fmt: skip
    lines = Lines(srl_run(ray, run_dir, argv))
    killed: dict[str, Any] = {}

    def kill_then_watch() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and lines.proc.poll() is None:
            path = run_dir / "metrics.jsonl"
            rows = path.read_text().splitlines() if path.exists() else []
            if rows and json.loads(rows[-1])["env_steps"] >= 5_000:
                break
            time.sleep(0.2)
        label = next((h for h in ("c", "b") if workers_on(cluster, h)), None)
        if label is None:
            return
        lost = workers_on(cluster, label)
        killed.update(host=label, lost=lost, at=time.monotonic(), loadavg=[round(x, 2) for x in os.getloadavg()])
        cluster.kill_host(label)
        left = [h.label for h in cluster.hosts if h.label != label]
        while time.monotonic() < deadline and lines.proc.poll() is None:
            running = {w for h in left for w in workers_on(cluster, h)}
            if all(w in running for w in lost):
                killed["replaced_at"] = time.monotonic()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=kill_then_watch, daemon=True)
    watcher.start()
    code = lines.finish(RUN_LIMIT_S)
    watcher.join(timeout=30)
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    restarted = [t for t, line in lines.lines if line.startswith("srl: restarted ") and t >= killed.get("at", 0)]
    at = killed.get("at")
    return {
        "exit": code, "host_killed": killed.get("host"), "workers_lost": killed.get("lost"),
        "loadavg_at_kill": killed.get("loadavg"),
        "kill_to_restart_s": round(restarted[0] - at, 2) if restarted and at else None,
        "kill_to_running_on_a_host_left_s": round(killed["replaced_at"] - at, 2) if "replaced_at" in killed else None,
        "stop_reason": summary.get("stop_reason"), "restarts": summary.get("restarts"),
        "time_to_target_s": summary.get("time_to_target_s"), "env_steps": summary.get("env_steps"),
        **({"output_tail": lines.text()[-3000:]} if code != 0 else {}),
    }  # fmt: skip


def summarize(runs: list[dict]) -> dict[str, Any]:
    by_cell: dict[str, list[float]] = {}
    for run in runs:
        if run.get("env_steps_per_s") is not None:
            delay = "" if run.get("delay_ms") is None else f"/delay {run['delay_ms']:g} ms"
            by_cell.setdefault(f"{run['cell']}/{run['rate']}{delay}", []).append(run["env_steps_per_s"])
    medians = {cell: statistics.median(rates) for cell, rates in by_cell.items()}
    one = next((m for cell, m in medians.items() if cell.startswith("one_host/")), None)
    return {cell: {"median_env_steps_per_s": round(m, 1), "runs": by_cell[cell],
                   "ratio_to_one_host": round(m / one, 3) if one else None} for cell, m in medians.items()}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="none,1gbit,100mbit", help="three_hosts link rates (none: unshaped)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over the cells, interleaved")
    parser.add_argument("--envs", type=int, default=4, help="envs per actor (two actors)")
    parser.add_argument("--warmup-s", type=float, default=20.0, help="after the first env steps, before measuring")
    parser.add_argument("--window-s", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--tail-s", type=float, default=5.0, help="run on after the window")
    parser.add_argument("--host-loss", action="store_true", help="the host-loss run instead (cartpole-ppo)")
    parser.add_argument("--experiment", default="pong-ppo", choices=("pong-ppo", "cartpole-ppo"),
                        help="cartpole-ppo: env steps and training cheap, so the policy worker's round trips show")
    parser.add_argument("--delays-ms", default=None,
                        help="added latency between hosts instead of rates, e.g. 0.1,1,10 (a user-space forwarder)")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("hosts_pong.py makes network namespaces: run it as root")
    rates = [None if r == "none" else r for r in args.rates.split(",")]
    cells: list[tuple[str, str | None, float | None]] = [("one_host", None, None)] + [("three_hosts", r, None) for r in rates]
    delays = None if args.delays_ms is None else [float(d) for d in args.delays_ms.split(",")]
    if delays is not None:  # the forwarder's own cost first (no delay), then each delay
        cells = [("one_host", None, 0.0)] + [("three_hosts", None, d) for d in [0.0, *delays]]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out: dict[str, Any] = {"benchmark": "hosts_pong", "commit": commit, "cpus": len(os.sched_getaffinity(0)),
                           "loadavg_at_start": [round(x, 2) for x in os.getloadavg()], "envs_per_actor": args.envs,
                           "actors": 2, "warmup_s": args.warmup_s, "window_s": args.window_s,
                           "experiment": args.experiment, "delays_ms": args.delays_ms}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="hosts-pong-") as tmp, hosts_up(3, delay_ms=0 if delays else None) as cluster:
        ray = RayHosts(cluster, resources=RESOURCES, num_cpus=CPUS_PER_NODE, env=env).start()
        if args.host_loss:
            out["host_loss"] = host_loss(ray, Path(tmp))
        else:
            runs = []
            for n in range(args.repeats):
                for cell, rate, delay_ms in cells:
                    runs.append(run_cell(ray, cell, rate, args, Path(tmp), n, delay_ms))
                    print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
            out["runs"], out["cells"] = runs, summarize(runs)
    out["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()

