"""srl past one host: a cluster of network namespaces (srl.testing.hosts) that comes up and goes
down leaving nothing; a Ray cluster across three of its hosts (Ray's own CLI, srl.testing.ray_hosts)
on which cartpole-ppo reaches 475 with every stream over tcp between three addresses; a host lost
mid-run (every process in its namespace SIGKILLed, its raylet included) whose workers are placed
again on the hosts left; a host cut off for 10 s that the run rides out without restarts.

Needs root (CI runs as root): elsewhere the cluster's tests fail saying so; they never skip.
One Ray cluster serves the module's runs (starting one takes Ray tens of seconds)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import srl
from srl.testing import check_counts, hosts
from srl.testing.hosts import Cluster, LatencyRelay, hosts_up
from srl.testing.ray_hosts import RayHosts, workers_on
from srl.testing.ray_hosts import finish as finish_run

TESTS = Path(__file__).resolve().parent
RUN_TIMEOUT_S = 600
RESOURCES = {  # roles are pinned to a host by host_X; `sim` may be held by hosts b and c alike
    "a": {"host_a": 4}, "b": {"host_b": 4, "sim": 4}, "c": {"host_c": 4, "sim": 4},
}  # fmt: skip
PINNED = [  # trainer and parameter service on a (with the controller), every other role on b or c
    "launch.ray_resources.trainer.resources.host_a=1", "launch.ray_resources.params.resources.host_a=1",
    "launch.ray_resources.params.num_cpus=0",
]  # fmt: skip


def env_for_hosts() -> dict[str, str]:
    """The environment of every process on the hosts: this srl, and the tests' own modules."""
    root = str(Path(srl.__file__).resolve().parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, str(TESTS)])}


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("tests/test_hosts.py makes network namespaces: run it as root (CI does)")


def leftovers(cluster: Cluster, pids: list[int]) -> list[str]:
    """What of `cluster` still exists: namespaces, links, processes, its state file, its folder."""
    found = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
             if n.startswith(cluster.name)]  # fmt: skip
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found += [word for word in links.split() if word.startswith(cluster.name)]
    found += [f"pid {pid}" for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    found += [str(p) for p in (cluster.state_path, Path(f"/tmp/{cluster.name}")) if p.exists()]
    return found


def message_between(cluster: Cluster, sender: str, receiver: str, payload: bytes) -> bytes:
    """`payload` sent by a process on host `sender` to one listening on host `receiver`; what arrived."""
    address = cluster.host(receiver).address
    listen = (f"import socket,sys;s=socket.create_server(('{address}',7000));print('ready',flush=True);"
              "c,_=s.accept();sys.stdout.buffer.write(c.makefile('rb').read())")  # fmt: skip
    server = cluster.spawn(receiver, [sys.executable, "-c", listen], stdout=subprocess.PIPE)
    assert server.stdout is not None and server.stdout.readline() == b"ready\n"
    send = f"import socket;socket.create_connection(('{address}',7000),timeout=10).sendall({payload!r})"
    subprocess.run(cluster.argv_on(sender, [sys.executable, "-c", send]), check=True, timeout=60)
    received, _ = server.communicate(timeout=60)
    return received


def test_the_hosts_cluster_carries_messages_between_addresses_and_leaves_nothing():
    """`python -m srl.testing.hosts up`, a message from host a's address to host b's, shaped
    links, then `down`: no namespace, link, process, state file or folder is left."""
    require_root()
    up = subprocess.run([sys.executable, "-m", "srl.testing.hosts", "up", "--hosts", "3", "--rate", "100mbit"],
                        capture_output=True, text=True, env=env_for_hosts(), timeout=120)  # fmt: skip
    assert up.returncode == 0, up.stderr
    cluster = Cluster.load(json.loads(up.stdout)["name"])
    pids: list[int] = []
    try:
        assert [h.address for h in cluster.hosts] == [f"{cluster.subnet}.{i}" for i in (2, 3, 4)]
        assert message_between(cluster, "a", "b", b"x" * 100_000) == b"x" * 100_000
        pids = [p.pid for p in cluster.processes]
        sleeper = cluster.spawn("c", ["sleep", "600"])  # left running: `down` must stop it
        pids.append(sleeper.pid)
        blocked = next(line for line in Path(f"/proc/{sleeper.pid}/status").read_text().splitlines() if line.startswith("SigBlk"))
        assert int(blocked.split()[1], 16) == 0, blocked  # it heeds `down`'s SIGTERM
        for host in cluster.hosts:
            shaping = subprocess.run(["tc", "qdisc", "show", "dev", host.veth], capture_output=True, text=True).stdout
            assert "tbf" in shaping and "rate 100Mbit" in shaping, shaping
    finally:
        down = subprocess.run([sys.executable, "-m", "srl.testing.hosts", "down", cluster.name],
                              capture_output=True, text=True, env=env_for_hosts(), timeout=120)  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert leftovers(cluster, pids) == []


def test_ctrl_c_while_the_cluster_is_up_removes_it():
    """A program holding a cluster (`with hosts_up(...)`) and a process on it, stopped by Ctrl-C."""
    require_root()
    code = ("import sys,time;from srl.testing.hosts import hosts_up\n"
            "with hosts_up(2) as c:\n"
            "    p = c.spawn('b', ['sleep', '600'])\n"
            "    print(c.name, p.pid, flush=True)\n"
            "    time.sleep(600)\n")  # fmt: skip
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env_for_hosts(),
                              start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    try:
        assert holder.stdout is not None
        name, pid = holder.stdout.readline().split()
        cluster = Cluster.load(name)
        assert psutil.pid_exists(int(pid))
        holder.send_signal(signal.SIGINT)
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
    assert leftovers(cluster, [int(pid)]) == []


@pytest.mark.parametrize("euid, path, why", [
    (1000, os.environ.get("PATH", ""), "needs root"),
    (0, "/nonexistent", "needs iproute2's ip and tc: not found on PATH"),
])  # fmt: skip
def test_up_refuses_in_one_line_where_it_cannot_make_namespaces(monkeypatch, capsys, euid, path, why):
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    monkeypatch.setenv("PATH", path)
    assert hosts.main(["up", "--hosts", "2"]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and why in err and err.startswith("srl.testing.hosts: "), err
    assert out == ""


def test_the_relay_delays_a_connection_between_hosts_by_its_milliseconds():
    """There is no netem: a relay on host a in front of a listener on host b adds its delay to a
    round trip through it (once each way), and forwards every byte."""
    require_root()
    with hosts_up(2) as cluster:
        a, b = (h.address for h in cluster.hosts)
        echo = (f"import socket;s=socket.create_server(('{b}',7001));print('ready',flush=True);c,_=s.accept()\n"
                "while (d:=c.recv(65536)): c.sendall(d)\n")  # fmt: skip
        server = cluster.spawn("b", [sys.executable, "-c", echo], stdout=subprocess.PIPE)
        assert server.stdout is not None and server.stdout.readline() == b"ready\n"
        relay = cluster.spawn("a", [sys.executable, "-m", "srl.testing.hosts", "relay", "--listen", f"{a}:7002",
                                    "--to", f"{b}:7001", "--delay-ms", "150"], env=env_for_hosts())  # fmt: skip
        probe = (f"import socket,time\n"
                 f"for _ in range(100):\n"
                 f"    try: s=socket.create_connection(('{a}',7002)); break\n"
                 f"    except OSError: time.sleep(0.1)\n"
                 f"t=time.monotonic(); s.sendall(b'y'*200000); got=b''\n"
                 f"while len(got)<200000: got+=s.recv(65536)\n"
                 f"print(time.monotonic()-t, got==b'y'*200000)")  # fmt: skip
        out = subprocess.run(cluster.argv_on("a", [sys.executable, "-c", probe]), capture_output=True, text=True,
                             timeout=60, check=True).stdout.split()  # fmt: skip
        assert relay.poll() is None
        assert float(out[0]) >= 0.3 and out[1] == "True", out


def test_an_in_process_relay_stops_and_its_port_is_free_again():
    listener = socket.create_server(("127.0.0.1", 0))
    relay = LatencyRelay(("127.0.0.1", 0), listener.getsockname()[:2], delay_ms=1).start()
    assert relay.address is not None
    with socket.create_connection(relay.address, timeout=10) as client:
        accepted, _ = listener.accept()
        client.sendall(b"hello")
        assert accepted.recv(5) == b"hello"
        accepted.close()
    relay.stop()
    listener.close()
    socket.create_server(relay.address).close()  # the relay let go of its port


# --- srl on a Ray cluster across the hosts -----------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    require_root()
    with hosts_up(3) as made:
        yield made


def unshared(cluster: Cluster) -> Path:
    """A folder host b sees empty and its own (RayHosts' `private`): run directories under it are
    not shared between host a, where the controller writes, and host b."""
    assert cluster.workdir is not None
    return Path(cluster.workdir) / "unshared"


@pytest.fixture(scope="module")
def ray_nodes(cluster: Cluster) -> RayHosts:
    return RayHosts(cluster, resources=RESOURCES, num_cpus=2, env=env_for_hosts(),
                    private={"b": str(unshared(cluster))}).start()


@pytest.fixture
def ray_hosts(ray_nodes: RayHosts) -> RayHosts:
    """The module's Ray cluster with every node up (a host lost by a test before is started again)."""
    lost = [h.label for h in ray_nodes.cluster.hosts if not ray_nodes.alive(h.label)]
    for label in lost:
        ray_nodes.start_node(label)
    if lost:
        ray_nodes.wait_for_nodes(len(ray_nodes.cluster.hosts), labels=lost)
    return ray_nodes


def srl_on(ray_hosts: RayHosts, run_dir: Path, *args: str) -> subprocess.Popen:
    """`srl run cartpole-ppo` from host a (the Ray head's), every stream over tcp."""
    return ray_hosts.cluster.spawn("a", [
        sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "launch.launcher=ray", f"launch.ray_address={ray_hosts.address}",
        "dataflow.transport=tcp", "run.seed=1", f"run.run_dir={run_dir}", "monitor.display=off",
        "monitor.learning_curve=false", *args,
    ], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ray_hosts.env)  # fmt: skip


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    return finish_run(proc, RUN_TIMEOUT_S)


def when_training(run_dir: Path, env_steps: int, then, timeout_s: float = 300) -> threading.Thread:
    """Call `then()` in a thread once the run reports `env_steps` (its result in thread.result)."""

    def wait_then() -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            path = run_dir / "metrics.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            if lines and json.loads(lines[-1])["env_steps"] >= env_steps:
                thread.result = then()  # type: ignore[attr-defined]
                return
            time.sleep(0.2)

    thread = threading.Thread(target=wait_then, daemon=True)
    thread.result = None  # type: ignore[attr-defined]
    thread.start()
    return thread


def kill_an_actors_host(cluster: Cluster) -> tuple[str, list[str], list[int]]:
    """SIGKILL every process of host c, or of b if Ray put no actor on c: (host, its srl workers, pids)."""
    label = next((h for h in ("c", "b") if workers_on(cluster, h)), "none")
    lost = workers_on(cluster, label) if label != "none" else []
    return label, lost, cluster.kill_host(label) if lost else []


def assert_restarted_for_the_loss(summary: dict, lost: list[str], output: str) -> None:
    """Only the lost host's workers were restarted, each once or twice. Twice was seen once in six
    runs. The likely cause, not confirmed: the controller learns of the death from the actor's
    broken connection at once, seconds before Ray's health checks mark the node dead, so Ray may
    place the first new actor on the dead host, and that one dies too."""
    lines = [line for line in output.splitlines() if line.startswith("srl: restarted ")]
    restarts = summary["restarts"]
    assert sorted(restarts) == sorted(lost) and all(1 <= n <= 2 for n in restarts.values()), (restarts, lost, lines)


def lose_an_actors_host(ray_hosts: RayHosts, run_dir: Path, proc: subprocess.Popen, at_env_steps: int) -> tuple[str, list[str], dict]:
    """Once `proc`'s run reports `at_env_steps`, the host of an actor other than a dies
    (kill_an_actors_host). The run ends with 0, only that host's workers were restarted, and those
    placed anew are on the hosts left: (the host, its srl workers, the run's summary)."""
    cluster = ray_hosts.cluster
    killer = when_training(run_dir, at_env_steps, lambda: kill_an_actors_host(cluster))
    code, output = finish(proc)
    killer.join()
    assert code == 0, output[-6000:]
    assert killer.result is not None, output[-6000:]
    label, lost, killed = killer.result
    assert lost and killed, (killer.result, output[-6000:])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert_restarted_for_the_loss(summary, lost, output)
    placement = json.loads((run_dir / "placement.json").read_text())
    left = {h.address for h in cluster.hosts if h.label != label}
    # placement.json asks each actor where it runs at the end, with a timeout: under load that ask
    # can fail ({"error": ...}, seen once in CI); a worker it did place is on a host left
    assert all(placement[name].get("host", "?") in left for name in lost if "error" not in placement[name]), (placement, label)
    return label, lost, summary


def test_cartpole_ppo_across_three_hosts_reaches_475(ray_hosts, run_dir):
    """Trainer and parameter service on host a, the actor on b, the policy worker on c: every
    message between them crosses two links of the bridge, and each link carries megabytes."""
    cluster = ray_hosts.cluster
    idle = {h.label: cluster.link_bytes(h.label) for h in cluster.hosts}
    time.sleep(5)
    idle = {h.label: cluster.link_bytes(h.label) - idle[h.label] for h in cluster.hosts}  # Ray's own chatter in 5 s
    before = {h.label: cluster.link_bytes(h.label) for h in cluster.hosts}
    code, output = finish(srl_on(
        ray_hosts, run_dir, "dataflow.inference=policy_worker", "stop.target_return=475", *PINNED,
        "launch.ray_resources.actor.resources.host_b=1", "launch.ray_resources.policy.resources.host_c=1",
    ))  # fmt: skip
    assert code == 0, output
    carried = {h.label: cluster.link_bytes(h.label) - before[h.label] for h in cluster.hosts}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return 475"), summary
    assert summary["episode_return_mean"] >= 475 and summary["restarts"] == {}, summary
    placement = json.loads((run_dir / "placement.json").read_text())
    host = {name: where["host"] for name, where in placement.items()}
    a, b, c = (h.address for h in cluster.hosts)
    assert host == {"trainer:0": a, "params:0": a, "actor:0": b, "policy:0": c}, placement
    for label, n in carried.items():  # observations and actions, segments, parameters
        assert n > 1_000_000 and n > 20 * idle[label], (carried, idle)


def test_an_ensemble_over_tcp_on_two_nodes_that_share_no_run_directory_ranks_and_adopts(ray_hosts):
    """The controller on host a, both members on host b, whose run directory is its own (a tmpfs
    only b's processes see): each evaluation's weights come to the controller with the report, the
    leader's weights go to a laggard with its adopt, and nothing is read through the disk."""
    from srl.population import leaderboard

    cluster = ray_hosts.cluster
    run_dir = unshared(cluster) / "ensemble"  # host a's; on host b the same path is b's own, empty at first
    proc = cluster.spawn("a", [
        sys.executable, "-m", "srl.cli", "run", "cartpole-pod-ensemble", "launch.launcher=ray",
        f"launch.ray_address={ray_hosts.address}", "dataflow.transport=tcp", "run.seed=3", f"run.run_dir={run_dir}",
        "monitor.display=off", "monitor.learning_curve=false", "launch.ray_resources.pod.resources.host_b=1",
        "dataflow.envs_per_actor=16", "pod.ensemble.population=2", "pod.ensemble.eval_interval_updates=2",
        "pod.ensemble.eval_episodes=4", "pod.ensemble.ready_evals=1", "stop.max_updates=60", "stop.target_return=null",
    ], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ray_hosts.env)  # fmt: skip
    code, output = finish(proc)
    assert code == 0, output
    b = cluster.host("b").address
    placement = json.loads((run_dir / "placement.json").read_text())
    assert {name: where["host"] for name, where in placement.items()} == {"pod:0": b, "pod:1": b}, placement
    table = leaderboard.read(run_dir)
    assert len(table["entries"]) == 5 and len(table["replacements"]) >= 1, table
    assert all(Path(e["checkpoint"]).is_file() for e in table["entries"])  # the reports' weights, kept on a
    replaced = table["replacements"][-1]["member"]
    assert (run_dir / "members" / f"m{replaced}" / "adopt.pt").is_file()  # the controller's copy it sent
    # the members checkpointed where they ran: on b's own disk, not on a's
    assert not list(run_dir.glob("members/m*/checkpoints")), sorted(str(p) for p in run_dir.rglob("*"))


def test_a_self_play_league_over_tcp_on_two_nodes_that_share_no_run_directory_snapshots_and_rates(ray_hosts):
    """tictactoe, the learner against its league: the controller on host a, the learner's trainer,
    its parameter service and the actor on host b, whose run directory is its own. The keeper takes
    each snapshot from the learner's parameters and sends it, with the table, to the actor's
    league-pool policy over the league's streams: snapshots are made, played and rated, and the
    learner's checkpoints never reach host a."""
    from srl.population.league import FILE, League

    cluster = ray_hosts.cluster
    run_dir = unshared(cluster) / "league"  # host a's; on host b the same path is b's own, empty at first
    proc = cluster.spawn("a", [
        sys.executable, "-m", "srl.cli", "run", "tictactoe-ppo", "launch.launcher=ray",
        f"launch.ray_address={ray_hosts.address}", "dataflow.transport=tcp", "run.seed=1", f"run.run_dir={run_dir}",
        "monitor.display=off", "monitor.learning_curve=false", "eval.episodes=0", "stop.total_env_steps=20000",
        "env_kwargs.sides=[learner, league]", "policy_mapping={learner: learner, league: league}",
        "policies={learner: {}, league: {league: {of: learner, snapshot_interval_updates: 5, choose: uniform, "
        "scripted: [random-legal], refresh_s: 0.5}}}",
        *[f"launch.ray_resources.{role}.resources.host_b=1" for role in ("actor", "trainer", "params")],
        "launch.ray_resources.params.num_cpus=0",
    ], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ray_hosts.env)  # fmt: skip
    code, output = finish(proc)
    assert code == 0, output
    b = cluster.host("b").address
    placement = json.loads((run_dir / "placement.json").read_text())
    assert {where["host"] for where in placement.values()} == {b}, placement
    league = League.load(run_dir / FILE)
    snapshots = [s for s in league.snapshots.values() if not s.scripted]
    assert len(snapshots) >= 2 and sum(1 for s in snapshots if s.games) >= 1, league.to_json()
    assert all((run_dir / s.checkpoint).is_file() for s in snapshots)  # the keeper's own files, on a
    assert league.learner_elo != 1200.0 and league.snapshots["random-legal"].games > 0
    # the learner checkpointed where it trained: on b's own disk, not on a's
    assert not list(run_dir.glob("policies/learner/checkpoints")), sorted(str(p) for p in run_dir.rglob("*"))


def test_a_host_cut_off_for_10_s_rejoins_without_a_restart_storm(ray_hosts, run_dir):
    """Host c's link down for 10 s while its actor trains (shorter than the heartbeat timeout and
    Ray's node-death detection): no bytes cross it meanwhile, and when it is back the run goes on
    to 475 with no restart storm: no worker restarted twice.

    Most runs restart nothing. On a machine loaded far past its cores (load average 25 on 2) two
    of five runs restarted every worker once, those on hosts a and b too, all at once, for "no
    heartbeat for 30 s" around the cut: not understood yet (the controller's loop kept turning)."""
    cluster = ray_hosts.cluster
    proc = srl_on(ray_hosts, run_dir, "launch.num_actor_workers=2", "launch.ray_resources.actor.resources.sim=1",
                  "stop.target_return=475", *PINNED)  # fmt: skip

    def partition() -> tuple[list[str], int]:
        label = next((h for h in ("c", "b") if workers_on(cluster, h)), "c")
        on_it = workers_on(cluster, label)
        cluster.set_link(label, up=False)
        try:
            start = cluster.link_bytes(label)
            time.sleep(10)
            crossed = cluster.link_bytes(label) - start
        finally:
            cluster.set_link(label, up=True)
        return on_it, crossed

    cutter = when_training(run_dir, 5_000, partition)
    code, output = finish(proc)
    cutter.join()
    assert code == 0, output
    on_it, crossed = cutter.result
    assert on_it and crossed == 0, cutter.result
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return 475"), summary
    restarts = summary["restarts"]
    assert all(n == 1 for n in restarts.values()), summary
    assert output.count("srl: restarted ") == sum(restarts.values()), output


def test_a_lost_host_s_workers_are_placed_again_on_the_hosts_left(ray_hosts, run_dir):
    """Two actors asking for `sim` (hosts b and c have it; Ray spreads them), the trainer and
    parameter service on a. Once the run trains, every process on the host of an actor other than
    a dies at once (its raylet, the actor, Ray's agents): the actor is restarted once, on a host
    left, and the run reaches 475."""
    proc = srl_on(ray_hosts, run_dir, "launch.num_actor_workers=2", "launch.ray_resources.actor.resources.sim=1",
                  "stop.target_return=475", *PINNED)  # fmt: skip
    label, _, summary = lose_an_actors_host(ray_hosts, run_dir, proc, at_env_steps=5_000)
    assert not ray_hosts.alive(label)  # its raylet died with it
    assert summary["stop_reason"].startswith("target_return 475"), summary


def test_across_a_lost_host_no_transition_arrives_twice(ray_hosts, run_dir):
    """Counting envs (srl.testing.check_counts) on two actors asking for `sim`, a trainer on host a
    that records every batch: the host of an actor dies mid-run; every segment that reached the
    trainer is whole and no transition arrived twice, from the lost actor's life before and its
    restarted life after, which ran on a host left; the run reaches its env steps."""
    batches = run_dir.parent / "batches"
    proc = srl_on(
        ray_hosts, run_dir, "env=counting-lives", "env_kwargs.episode_length=7", "env_kwargs.step_s=0.005",
        "algorithm=record", f"algo.out_dir={batches}", "modules=lives_env,recording", "stop.target_return=null",
        "stop.total_env_steps=12000", "dataflow.max_policy_lag=1000000", "launch.num_actor_workers=2",
        "launch.ray_resources.actor.resources.sim=1", *PINNED,
    )  # fmt: skip
    _, lost, summary = lose_an_actors_host(ray_hosts, run_dir, proc, at_env_steps=2_000)
    assert summary["stop_reason"].startswith("total_env_steps"), summary
    from recording import load_batches

    recorded = load_batches(batches)
    totals = check_counts([b["obs"] for b in recorded], [b["terminated"] for b in recorded], 7)
    lives = {env_id % 100_000 for env_id, _ in totals["per_stream"]}
    assert len(lives) >= 3, lives  # each actor's first life, and the lost one's life after its restart


def test_losing_the_host_of_the_trainer_and_the_parameter_service_ends_the_run_with_a_clear_error(ray_hosts, run_dir):
    """The trainer and the parameter service on host c (asking for host_c: nowhere else to go),
    the actor on b. Host c dies mid-run: both are restarted together, Ray cannot place them, and
    within launch.ray_placement_timeout_s of that the run ends with a non-zero exit naming the
    worker and why; it never hangs (the run's own time limit is far beyond the bound asserted)."""
    cluster = ray_hosts.cluster
    proc = srl_on(
        ray_hosts, run_dir, "stop.target_return=null", "stop.total_env_steps=100000000", "stop.time_limit_s=500",
        "launch.ray_placement_timeout_s=10", "launch.ray_resources.trainer.resources.host_c=1",
        "launch.ray_resources.params.resources.host_c=1", "launch.ray_resources.params.num_cpus=0",
        "launch.ray_resources.actor.resources.host_b=1",
    )  # fmt: skip
    killer = when_training(run_dir, 3_000, lambda: (time.monotonic(), workers_on(cluster, "c"), cluster.kill_host("c")))
    code, output = finish(proc)
    ended_s = time.monotonic()
    killer.join()
    assert killer.result is not None, output
    killed_s, on_c, killed = killer.result
    assert sorted(on_c) == ["params:0", "trainer:0"] and killed, killer.result
    assert code not in (0, None), output
    assert ended_s - killed_s < 240, (ended_s - killed_s, output[-3000:])  # Ray's node death, then 10 s of waiting
    why = re.search(r"run failed: worker (trainer|params):0 failed:\nRay could not place it within "
                    r"launch\.ray_placement_timeout_s=10 s: .*custom resources \{host_c: 1\}", output)  # fmt: skip
    assert why, output[-3000:]


def test_a_host_lost_under_parameter_relays_is_ridden_out(ray_hosts, run_dir):
    """dataflow.param_relay=per_host: a relay on each host that runs an actor (two actors asking for
    `sim`), the trainer and parameter service on a. Once the run trains, the host of an actor other
    than a dies with its relay: the actor and the relay are restarted once each, on the hosts left
    (the actor subscribed to the service itself), and the run reaches 475."""
    proc = srl_on(ray_hosts, run_dir, "dataflow.param_relay=per_host", "launch.num_actor_workers=2",
                  "launch.ray_resources.actor.resources.sim=1", "stop.target_return=475", *PINNED)  # fmt: skip
    _, lost, summary = lose_an_actors_host(ray_hosts, run_dir, proc, at_env_steps=5_000)
    assert any(name.startswith("relay:") for name in lost), lost
    assert summary["stop_reason"].startswith("target_return 475"), summary


PORT_TAKEN_BY_CONNECTIONS = """
import socket, sys
with open("/proc/sys/net/ipv4/ip_local_port_range", "w") as f:
    f.write("40000 40019")  # this host's ephemeral range: 20 ports
from srl.streams.listeners import listen
from srl.streams.tcp_setup import free_ports
port = free_ports("127.0.0.1", 1)[0]  # chosen when the run is placed; its owner binds it later, or again at a restart
server = socket.create_server(("127.0.0.1", 7000))
clients = []
for _ in range(30):  # other programs connect out meanwhile, every ephemeral port taken
    try:
        clients.append(socket.create_connection(("127.0.0.1", 7000)))
    except OSError:
        break
listen("127.0.0.1", port)
print("bound", port, len(clients))
"""


def test_a_port_chosen_for_a_stream_stays_free_while_other_programs_connect_out():
    """A stream's port is chosen at placement and bound by its owner and each of its restarts:
    outgoing connections of other programs, which take free ports of the ephemeral range, never
    take it (in a host whose ephemeral range is 20 ports, 30 connections out take them all)."""
    require_root()
    with hosts_up(1) as cluster:
        run = subprocess.run(cluster.argv_on("a", [sys.executable, "-c", PORT_TAKEN_BY_CONNECTIONS]),
                             capture_output=True, text=True, env=env_for_hosts(), timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    _, port, connected = run.stdout.split()
    assert int(connected) == 20 and not 40000 <= int(port) <= 40019, run.stdout


ROUND_TRIPS = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 7001), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range(20):
    t = time.monotonic(); s.sendall(b"x"); s.recv(1); times.append(time.monotonic() - t)
s.sendall(b"y" * 1_000_000); got = b""
while len(got) < 1_000_000:
    got += s.recv(65536)
print(min(times) * 1000, got == b"y" * 1_000_000)
"""


def test_hosts_up_with_a_delay_delays_every_round_trip_between_hosts_and_leaves_nothing():
    """`up --delay-ms 5`: each host's link is two TAPs joined by a forwarder (there is no netem),
    a frame between two hosts crosses two links, half the delay each: the fastest of 20 round
    trips on a connection from host a to b takes at least 2 x 5 ms (the ports were not known
    beforehand), a megabyte arrives whole; set to 20 ms, at least 40 ms; and `down` removes the
    forwarders and the links."""
    require_root()
    up = subprocess.run([sys.executable, "-m", "srl.testing.hosts", "up", "--hosts", "2", "--delay-ms", "5"],
                        capture_output=True, text=True, env=env_for_hosts(), timeout=120)  # fmt: skip
    assert up.returncode == 0, up.stderr
    cluster = Cluster.load(json.loads(up.stdout)["name"])
    pids = [p.pid for p in cluster.processes]
    try:
        assert len(pids) == 1 and cluster.delay_ms == 5, cluster  # the forwarder
        b = cluster.host("b").address
        echo = (f"import socket;s=socket.create_server(('{b}',7001));print('ready',flush=True)\n"
                "while True:\n c,_=s.accept()\n while (d:=c.recv(65536)): c.sendall(d)\n")  # fmt: skip
        server = cluster.spawn("b", [sys.executable, "-c", echo], stdout=subprocess.PIPE)
        pids.append(server.pid)
        assert server.stdout is not None and server.stdout.readline() == b"ready\n"
        out = subprocess.run(cluster.argv_on("a", [sys.executable, "-c", ROUND_TRIPS, b]), capture_output=True,
                             text=True, timeout=60, check=True).stdout.split()  # fmt: skip
        assert float(out[0]) >= 10 and out[1] == "True", out
        cluster.set_delay(20)  # a new forwarder, the TAPs kept
        pids += [p.pid for p in cluster.processes if p.pid not in pids]
        out = subprocess.run(cluster.argv_on("a", [sys.executable, "-c", ROUND_TRIPS, b]), capture_output=True,
                             text=True, timeout=60, check=True).stdout.split()  # fmt: skip
        assert float(out[0]) >= 40 and out[1] == "True", out
    finally:
        down = subprocess.run([sys.executable, "-m", "srl.testing.hosts", "down", cluster.name],
                              capture_output=True, text=True, env=env_for_hosts(), timeout=120)  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert leftovers(cluster, pids) == []
