"""The parameter relay (srl.workers.params.ParamRelayKernel, dataflow.param_relay): one per host,
subscribed once to the service, serving its host's subscribers.

By hand, kernel by kernel on one in-process transport: each version reaches every subscriber of
a relay while the service sends one copy to the relay; a local WANT for a newer version is asked
upstream; a restarted relay asks upstream as a late joiner does; WANTs close together are answered
once, not once each. The launcher's rule (srl.launch.relays), the graph it makes, the config's
check, and a local run through a relay.

Across hosts (needs root, as CI runs): cartpole-ppo on three namespace hosts, two actors on each of
b and c, learns while the service's params.out holds one connection per subscriber host (2), not
one per actor (4)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import torch

import srl
import srl.streams.params as params_module
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.graph import WorkerSpec, build_graph, param_subscribers, with_param_relays
from srl.launch.relays import relay_groups
from srl.launch.supervise import restart_graph
from srl.streams.control import Role
from srl.streams.inline import InlineTransport
from srl.streams.params import (
    ANSWER_INTERVAL_S,
    PUBLISH,
    SERVICE,
    SERVICE_IN,
    SERVICE_OUT,
    WANT,
    WANT_RETRY_S,
    ParamPublisher,
    ParamSubscriber,
    relay_prefix,
    relay_streams,
    tensor_bytes,
)
from srl.streams.prefixed import PrefixedTransport, RenamedTransport
from srl.workers.params import ParamRelayKernel, ParamServiceKernel

SUBSCRIBERS = 3


class Host:
    """A trainer's publisher and the service on one transport; a relay and its subscribers too,
    the subscribers on the relay's streams as a relayed worker opens them (srl.graph.build)."""

    def __init__(self) -> None:
        self.transport = InlineTransport()
        self.model = torch.nn.Linear(3, 2)
        self.publisher = ParamPublisher(self.transport)
        self.service = ParamServiceKernel(self.transport, tensor_bytes(self.model))
        self.relay = self.new_relay()
        local = RenamedTransport(self.transport, relay_streams(0))
        self.models = [torch.nn.Linear(3, 2) for _ in range(SUBSCRIBERS)]
        self.subscribers = [ParamSubscriber(local, model) for model in self.models]

    def new_relay(self) -> ParamRelayKernel:
        served = PrefixedTransport(self.transport, relay_prefix(0))
        return ParamRelayKernel(self.transport, served, tensor_bytes(self.model))

    def publish(self, version: int) -> None:
        with torch.no_grad():
            self.model.weight.fill_(version)
        self.publisher.publish(version, self.model)

    def round(self, waiting_for: int = 0) -> list[int]:
        """Service, relay, subscribers, relay, service each polled once: the subscribers' versions."""
        self.service.poll()
        self.relay.poll()
        for subscriber, model in zip(self.subscribers, self.models):
            subscriber.poll(model, waiting_for)
        versions = [subscriber.version for subscriber in self.subscribers]
        assert all(float(m.weight[0, 0].detach()) == v for m, v in zip(self.models, versions) if v >= 0), "loaded"
        self.relay.poll()
        self.service.poll()
        return versions


def test_a_relay_sends_each_version_to_its_subscribers_while_the_service_sends_it_once(params_clock):
    host = Host()
    upstream_copies = host.transport.subscriber(SERVICE_OUT)  # what the service sends, counted
    host.relay.poll()  # subscribes (and, holding nothing, asks: a late joiner)
    for version in range(4):
        host.publish(version)
        assert host.round() == [version] * SUBSCRIBERS
        params_clock.now += 1.0
    loaded = torch.nn.Linear(3, 2)
    subscriber = ParamSubscriber(RenamedTransport(host.transport, relay_streams(0)), loaded)
    host.relay.poll()
    assert not subscriber.poll(loaded), "a late joiner's first poll asks (WANT 0)"
    host.relay.poll()
    assert subscriber.poll(loaded) and subscriber.version == 3 and float(loaded.weight[0, 0].detach()) == 3.0
    sent = upstream_copies.recv_all()
    # one copy a version went out of the service (the relay's first WANT found nothing to answer)
    assert [m.header for m in sent] == [(v, 0) for v in range(4)]
    assert host.relay.report()["params_version"] == 3


def test_a_local_want_for_a_newer_version_is_asked_upstream_at_once(params_clock):
    """Lock step: a subscriber waiting for version 2 asks its relay (after WANT_RETRY_S, as it asks
    the service); the relay, holding 1, asks the service at once, and again every WANT_RETRY_S."""
    transport, model = InlineTransport(), torch.nn.Linear(3, 2)
    asked = transport.receiver(SERVICE_IN)  # the service's inbox, read by hand
    served = transport.publisher(SERVICE_OUT)
    relay = ParamRelayKernel(transport, PrefixedTransport(transport, relay_prefix(0)), tensor_bytes(model))
    subscriber = ParamSubscriber(RenamedTransport(transport, relay_streams(0)), torch.nn.Linear(3, 2))
    relay.poll()
    assert [m.header for m in asked.recv_all()] == [(WANT, 0)], "a relay holding nothing asks as a late joiner"
    frames = params_module.state_frames(model)
    served.send((1, 0), frames)
    relay.poll()
    assert subscriber.poll(torch.nn.Linear(3, 2)) and subscriber.version == 1
    assert not subscriber.poll(torch.nn.Linear(3, 2), waiting_for=2)
    params_clock.now += WANT_RETRY_S
    assert not subscriber.poll(torch.nn.Linear(3, 2), waiting_for=2)  # WANT 2 to the relay
    relay.poll()
    assert [m.header for m in asked.recv_all()] == [(WANT, 2)], "forwarded upstream at once"
    relay.poll()
    assert asked.recv_all() == [], "once per WANT_RETRY_S"
    params_clock.now += WANT_RETRY_S
    relay.poll()
    assert [m.header for m in asked.recv_all()] == [(WANT, 2)]
    served.send((2, 0), frames)
    relay.poll()
    assert subscriber.poll(torch.nn.Linear(3, 2), waiting_for=2) and subscriber.version == 2
    params_clock.now += WANT_RETRY_S
    relay.poll()
    assert asked.recv_all() == [], "it holds what was asked for: no more WANTs"
    assert relay.report()["wants_upstream"] == 3


def test_a_restarted_relay_asks_upstream_as_a_late_joiner_and_serves_its_subscribers_again(params_clock):
    host = Host()
    host.relay.poll()
    host.publish(5)
    assert host.round() == [5] * SUBSCRIBERS
    host.relay = host.new_relay()  # restarted: nothing held; the service publishes nothing new
    assert host.relay.version == -1
    params_clock.now += 1.0
    host.publish(6)
    host.service.receivers[0].recv_all()  # version 6 held back on the way to the service
    for _ in range(3):
        params_clock.now += WANT_RETRY_S
        versions = host.round(waiting_for=6)
    assert host.relay.version == 5 and versions == [5] * SUBSCRIBERS, "it asked and got what the service holds"
    host.publish(6)
    assert host.round(waiting_for=6) == [6] * SUBSCRIBERS


def test_wants_close_together_are_answered_once_not_once_each(params_clock):
    """The service publishes an answer to all (a publisher has no per-subscriber address): 1,024
    late joiners answered one by one made 2,732 copies of a version (docs/scaling.md). WANTs within
    ANSWER_INTERVAL_S of an answer are folded into one answer at its end."""
    transport = InlineTransport()
    service, out, asks = (
        ParamServiceKernel(transport, [4]),
        transport.subscriber(SERVICE_OUT),
        transport.sender(SERVICE_IN),
    )
    asks.send((PUBLISH, 5, 0), [b"5555"])
    service.poll()
    assert len(out.recv_all()) == 1
    answers = 0
    for _ in range(10):  # ten late joiners, each WANT polled on its own, within the interval
        asks.send((WANT, 0))
        service.poll()
        answers += len(out.recv_all())
        params_clock.now += ANSWER_INTERVAL_S / 20
    assert answers == 1, f"{answers} answers to 10 WANTs within {ANSWER_INTERVAL_S} s"
    params_clock.now += ANSWER_INTERVAL_S
    service.poll()
    assert len(out.recv_all()) == 1, "the WANTs folded in are answered at the interval's end"
    service.poll()
    assert out.recv_all() == [], "and only once"
    asks.send((WANT, 6))  # lock step: not held yet, no answer until it comes
    params_clock.now += ANSWER_INTERVAL_S
    service.poll()
    assert out.recv_all() == []
    asks.send((PUBLISH, 6, 0), [b"6666"])
    service.poll()
    params_clock.now += ANSWER_INTERVAL_S
    service.poll()
    assert [m.header for m in out.recv_all()] == [(6, 0)], "the publish answered it"


# --- where relays go, and the graph the launcher makes ----------------------------------------------
def graph_of(launcher: str = "local", **flow):
    return build_graph(build_config({
        "experiment": "relay", "env": "CartPole-v1", "algorithm": "ppo",
        "launch": {"launcher": launcher, "num_actor_workers": 6}, "dataflow": {"transport": "tcp", **flow},
    }))  # fmt: skip


def test_the_launcher_s_rule_relays_per_host_only_across_hosts():
    graph = graph_of(param_relay="auto")
    actors = [f"actor:{a}" for a in range(6)]
    assert param_subscribers(graph) == tuple(actors)
    one_host = {w.name: "a" for w in graph.workers}
    assert relay_groups(graph, one_host) == [], "auto: one host, no relay"
    hosts = {**one_host, **{a: "bc"[i % 2] for i, a in enumerate(actors)}, "actor:5": "a"}
    assert relay_groups(graph, hosts) == [("b", ("actor:0", "actor:2", "actor:4")), ("c", ("actor:1", "actor:3"))]
    hosts["actor:3"] = "d"  # alone on d: a relay would save nothing
    assert relay_groups(graph, hosts) == [("b", ("actor:0", "actor:2", "actor:4"))]
    per_host = graph_of(param_relay="per_host")
    assert relay_groups(per_host, one_host) == [("a", tuple(actors))]
    assert relay_groups(per_host, hosts)[-1] == ("a", ("actor:5",)), "per_host: the service's host too"
    assert relay_groups(graph_of(param_relay="off"), hosts) == []
    assert relay_groups(graph_of(), hosts) == relay_groups(graph, hosts), "auto by default"


def test_the_relayed_graph_declares_the_relay_s_streams_and_the_service_s_fewer_subscribers():
    graph = with_param_relays(graph_of(), [("actor:0", "actor:1"), ("actor:2", "actor:3")])
    streams = {s.name: s for s in graph.streams}
    assert [w.name for w in graph.workers if w.role == Role.RELAY] == ["relay:0", "relay:1"]
    assert streams[SERVICE_OUT].consumers == ("actor:4", "actor:5", "relay:0", "relay:1")
    assert streams[SERVICE_IN].producers == ("trainer:0", "actor:4", "actor:5", "relay:0", "relay:1")
    assert streams["relay1.params.out"].owner == "relay:1" and streams["relay1.params.out"].consumers == (
        "actor:2",
        "actor:3",
    )
    assert streams["relay0.params.in"].producers == ("actor:0", "actor:1")
    assert graph.param_relays == {"actor:0": 0, "actor:1": 0, "actor:2": 1, "actor:3": 1}
    assert "relay:1" in streams["controller.in"].producers and SERVICE in streams[SERVICE_OUT].producers


@pytest.mark.parametrize(("overrides", "why"), [
    ({"launcher": "inline", "param_relay": "per_host", "transport": "shm"}, "needs launch.launcher='local' or 'ray'"),
    ({"launcher": "ray", "param_relay": "per_host", "transport": "shm"}, "needs dataflow.transport='tcp'"),
    ({"param_relay": "sometimes"}, "param_relay"),
])  # fmt: skip
def test_a_relay_the_run_cannot_have_is_refused_in_one_line(overrides, why):
    with pytest.raises((ConfigError, ValueError)) as raised:
        graph_of(**overrides)
    message = str(raised.value)
    assert why in message and "param_relay" in message and "\n" not in message.strip(), message


# --- a run through a relay ------------------------------------------------------------------------
def srl_run(run_dir: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(([
        sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "dataflow.transport=tcp", "run.seed=1",
        f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false", *args,
    ]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip


def connections_per_listener(pid: int, ss=lambda argv: argv) -> list[int]:
    """Established connections accepted on each tcp port process `pid` listens on, sorted
    (`ss`, run where the process's network namespace is: `ss` maps an argv there)."""
    out = subprocess.run(ss(["ss", "-tanpH"]), capture_output=True, text=True, check=True).stdout
    mine = [line.split() for line in out.splitlines() if f"pid={pid}," in line]
    ports = {int(f[3].rsplit(":", 1)[1]) for f in mine if f[0] == "LISTEN"}
    local_ports = [int(f[3].rsplit(":", 1)[1]) for f in mine if f[0] == "ESTAB"]
    return sorted(sum(1 for p in local_ports if p == port) for port in ports)


def service_pid(pids: list[int], worker: str = "params:0") -> int | None:
    """The parameter service's process among `pids` (or `worker`'s), by its title, srl:<experiment>:<worker>."""
    for pid in pids:
        try:
            cmdline = psutil.Process(pid).cmdline()
        except psutil.Error:
            continue
        if cmdline and cmdline[0].startswith("srl:") and cmdline[0].endswith(f":{worker}"):
            return pid
    return None


def service_connections_while_training(proc: subprocess.Popen, pids, ss=lambda argv: argv, timeout_s: float = 240) -> list[list[int]]:
    """Connections on each of the service's listeners (params.in, params.out), looked at again
    and again until the run ends: subscribers join over its first seconds, so a look may see fewer
    than all, never more."""
    deadline, looks = time.monotonic() + timeout_s, []
    while time.monotonic() < deadline and proc.poll() is None:
        pid = service_pid(pids())
        if pid is not None:
            looks.append(connections_per_listener(pid, ss))
        time.sleep(0.5)
    assert any(looks), f"the service's connections were never seen: {looks}"
    return looks


def finish(proc: subprocess.Popen, timeout_s: float = 300) -> tuple[int, str]:
    from srl.testing.ray_hosts import finish as finish_run

    return finish_run(proc, timeout_s)


def children_of(proc: subprocess.Popen):
    def pids() -> list[int]:
        try:
            return [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
        except psutil.Error:
            return []

    return pids


def test_a_local_run_through_one_relay_learns_and_the_service_sends_to_the_relay_alone(run_dir):
    """dataflow.param_relay=per_host on one host: one relay for the 3 actors. The service's
    listeners hold the relay's connection (params.out) and the trainer's and the relay's (params.in)."""
    proc = srl_run(run_dir, "launch.launcher=local", "dataflow.param_relay=per_host", "launch.num_actor_workers=3",
                   "stop.target_return=100", "stop.total_env_steps=200000")  # fmt: skip
    try:
        counts = service_connections_while_training(proc, children_of(proc))
    finally:
        code, output = finish(proc)
    assert code == 0, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return 100"), output[-6000:]
    assert [1, 2] in counts and max(map(max, filter(None, counts))) == 2, (
        f"connections on the service's two listeners: {counts} (3 actors direct: [3, 4])")
    assert "relay:0" in output  # in the time breakdown: it ran


def test_a_restarted_relayed_subscriber_goes_back_to_its_relay_on_this_host_and_to_the_service_under_ray():
    relayed = with_param_relays(graph_of(launcher="local", param_relay="per_host"), [("actor:0", "actor:1")])
    again = restart_graph(relayed, WorkerSpec(Role.ACTOR, 0))
    assert again.param_relays == {"actor:0": 0, "actor:1": 0}, "local: its relay is where it was"
    on_ray = with_param_relays(graph_of(launcher="ray", param_relay="per_host"), [("actor:0", "actor:1")])
    assert restart_graph(on_ray, WorkerSpec(Role.ACTOR, 0)).param_relays == {"actor:1": 0}, "ray: it may land elsewhere"


def test_a_local_relayed_actor_killed_mid_run_comes_back_to_its_relay(run_dir):
    """per_host on one host, 3 actors behind one relay: actor:0 SIGKILLed once the run trains is
    restarted and subscribes to the relay again (the relay's two listeners hold 3 connections
    each once more), never to the service (whose listeners keep the relay's and the trainer's)."""
    proc = srl_run(run_dir, "launch.launcher=local", "dataflow.param_relay=per_host", "launch.num_actor_workers=3",
                   "stop.target_return=150", "stop.total_env_steps=300000")  # fmt: skip
    killed, service_looks, relay_looks = None, [], []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            pids = children_of(proc)()
            service, relay, actor = (service_pid(pids, w) for w in ("params:0", "relay:0", "actor:0"))
            metrics = run_dir / "metrics.jsonl"
            lines = metrics.read_text().splitlines() if metrics.exists() else []
            if killed is None and actor is not None and lines and json.loads(lines[-1])["env_steps"] >= 3_000:
                os.kill(actor, signal.SIGKILL)
                killed = actor
            elif killed is not None and actor not in (None, killed) and service is not None and relay is not None:
                service_looks.append(connections_per_listener(service))
                relay_looks.append(connections_per_listener(relay))
            time.sleep(0.5)
    finally:
        code, output = finish(proc)
    assert code == 0, output[-6000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts"] == {"actor:0": 1} and summary["stop_reason"].startswith("target_return 150"), summary
    assert killed is not None and relay_looks, (killed, relay_looks)
    assert [3, 3] in relay_looks, f"the relay's connections after the restart: {relay_looks}"
    assert max(map(max, service_looks)) == 2, f"the service's connections after the restart: {service_looks}"


# --- across namespace hosts (root) ---------------------------------------------------------------------
RESOURCES = {"a": {"host_a": 4}, "b": {"host_b": 4, "sim": 2}, "c": {"host_c": 4, "sim": 2}}  # 2 actors on b, 2 on c


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator:
    if os.geteuid() != 0:
        pytest.fail("the run across namespace hosts makes network namespaces: run it as root (CI does)")
    from srl.testing.hosts import hosts_up
    from srl.testing.ray_hosts import RayHosts

    root = str(Path(srl.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    with hosts_up(3) as cluster:
        yield RayHosts(cluster, resources=RESOURCES, num_cpus=2, env=env).start()


def test_across_hosts_the_service_holds_one_connection_per_subscriber_host_and_cartpole_learns(ray_cluster, run_dir):
    """Trainer and service on host a, two actors on each of b and c (inline inference: the actors
    subscribe): with dataflow.param_relay=auto the launcher starts a relay on b and one
    on c, and the service's params.out holds 2 connections, not 4."""
    cluster = ray_cluster.cluster
    proc = cluster.spawn("a", [
        sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "launch.launcher=ray",
        f"launch.ray_address={ray_cluster.address}", "dataflow.transport=tcp", "run.seed=1", f"run.run_dir={run_dir}",
        "dataflow.param_relay=auto", "monitor.display=off", "monitor.learning_curve=false", "launch.num_actor_workers=4",
        "launch.ray_resources.actor.resources.sim=1", "launch.ray_resources.trainer.resources.host_a=1",
        "launch.ray_resources.params.resources.host_a=1", "launch.ray_resources.params.num_cpus=0",
        "stop.target_return=150", "stop.total_env_steps=300000",
        "launch.heartbeat_timeout_s=120",  # 8 Ray workers importing torch at once on 2 shared cores: 30 s was seen to pass
    ], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ray_cluster.env)  # fmt: skip
    try:
        counts = service_connections_while_training(proc, lambda: cluster.pids("a"), ss=lambda argv: cluster.argv_on("a", argv))
    finally:
        code, output = finish(proc)
    assert code == 0, output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return 150") and summary["restarts"] == {}, output[-6000:]
    placement = json.loads((run_dir / "placement.json").read_text())
    a, b, c = (h.address for h in cluster.hosts)
    assert {placement["relay:0"]["host"], placement["relay:1"]["host"]} == {b, c}, placement
    assert sorted(placement[f"actor:{i}"]["host"] for i in range(4)) == [b, b, c, c], placement
    # a Ray worker listens on a port of Ray's own too (its core worker's, a few connections of
    # Ray's): the service's two are params.out, 2 (a relay per host), and params.in, 3 (the trainer
    # too); without relays they hold 4 and 5
    seen = [look for look in counts if look]
    assert any(max(look) == 3 and 2 in look for look in seen), seen
    assert max(map(max, seen)) == 3, f"connections on the service's listeners: {seen}"
