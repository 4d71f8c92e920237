"""The dataflow graph: declared streams, checks before launch, text and drawn output."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from srl.api import Worker, register_worker
from srl.config import ConfigError
from srl.config.load import load_config
from srl.graph import CONTROLLER, Delivery, StreamSpec, build_graph, check_streams
from srl.streams.queues import NEWEST_ONLY


@register_worker("graph-test-giver", outputs=("notes",))
class Giver(Worker):
    pass


@register_worker("graph-test-taker", inputs=("notes", "samples"))
class Taker(Worker):
    pass


def graph_of(*overrides: str):
    return build_graph(load_config("cartpole-ppo", list(overrides)))


def test_streams_follow_the_worker_counts():
    graph = graph_of("dataflow.inference=policy_worker", "launch.num_actor_workers=3", "launch.num_policy_workers=2")
    streams = {s.name: s for s in graph.streams}
    assert streams["policy.0.requests"].producers == ("actor:0", "actor:2")
    assert streams["policy.1.requests"].consumers == ("policy:1",) == (streams["policy.1.requests"].owner,)
    assert streams["actor.2.replies"].producers == ("policy:0",) and streams["actor.2.replies"].owner == "actor:2"
    assert streams["trainer.samples"].producers == ("actor:0", "actor:1", "actor:2")
    assert streams["params.out"].consumers == ("policy:0", "policy:1")
    assert streams["trainer.samples"].delivery == Delivery.SLOTS
    # the transports keep only the newest message on the streams the graph says deliver the latest value
    assert {s.name for s in graph.streams if s.delivery == Delivery.NEWEST} == set(NEWEST_ONLY)
    inline = {s.name: s for s in graph_of("dataflow.inference=inline", "launch.num_actor_workers=2").streams}
    assert not any("requests" in name or "replies" in name for name in inline)
    assert inline["params.out"].consumers == ("actor:0", "actor:1")


def test_several_trainers_each_bind_their_samples_and_meet_at_the_controller():
    graph = graph_of("launch.num_trainers=2", "launch.num_actor_workers=4", "dataflow.inference=policy_worker", "launch.num_policy_workers=2")
    streams = {s.name: s for s in graph.streams}
    assert streams["trainer.samples"].owner == "trainer:0" and streams["trainer.1.samples"].owner == "trainer:1"
    assert streams["trainer.1.samples"].producers == ("actor:1", "actor:3")
    assert streams["actor.3.released"].producers == ("trainer:1",)
    assert streams["gradients"].owner == CONTROLLER and streams["gradients"].via == "torch.distributed"
    assert {s.owner for s in graph.streams} == {w.name for w in graph.workers} | {CONTROLLER}


def test_a_stream_without_consumer_or_with_unknown_workers_is_an_error():
    graph = graph_of()
    orphan = StreamSpec("orphan", "user", "actor:0", ("actor:0",), (), Delivery.BOUNDED, "nothing")
    graph.streams.append(orphan)
    with pytest.raises(ConfigError, match="'orphan' has no consumer"):
        check_streams(graph)
    graph.streams[-1] = dataclasses.replace(orphan, consumers=("policy:7",))
    with pytest.raises(ConfigError, match="do not exist"):
        check_streams(graph)


def test_extra_workers_come_with_their_streams_and_are_refused_naming_the_field():
    graph = graph_of("extra_workers=[{kind: graph-test-giver, count: 2}, {kind: graph-test-taker}]")
    streams = {s.name: s for s in graph.streams}
    assert [(w.name, w.kind) for w in graph.workers if w.kind] == [
        ("custom:0", "graph-test-giver"), ("custom:1", "graph-test-giver"), ("custom:2", "graph-test-taker")]
    assert streams["user.notes"].owner == "custom:2" and streams["user.notes"].producers == ("custom:0", "custom:1")
    tap = streams["trainer.samples.tap"]  # the trainer publishes a copy of what it takes
    assert (tap.owner, tap.consumers, tap.frames) == ("trainer:0", ("custom:2",), streams["trainer.samples"].frames)
    with pytest.raises(ConfigError, match=r"'extra_workers\[0\].kind': unknown worker kind 'nope'; registered: .*graph-test-giver"):
        graph_of("extra_workers=[{kind: nope}]")
    with pytest.raises(ConfigError, match=r"'extra_workers': worker kind 'graph-test-taker' takes \['notes'\], which no"):
        graph_of("extra_workers=[{kind: graph-test-taker}]")
    with pytest.raises(ConfigError, match="'extra_workers': output 'notes' needs exactly one placed worker .* got 0"):
        graph_of("extra_workers=[{kind: graph-test-giver}]")


def test_impossible_batch_and_mismatched_spaces_fail_before_launch():
    with pytest.raises(ConfigError, match="num_minibatches"):
        graph_of("algo.num_minibatches=1000")
    with pytest.raises(ConfigError, match="cannot act in env"):
        graph_of("env=FrozenLake-v1", "policy=actor-critic-cnn")  # Discrete observations: the CNN takes images
    # the default MLP reads one Box: for a Tuple observation the multi-input policy acts (srl.spaces)
    assert list(graph_of("env=Blackjack-v1").slot_fields())[:3] == ["obs/0", "obs/1", "obs/2"]


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_srl_graph_draws_by_extension(tmp_path, suffix):
    out = tmp_path / f"graph{suffix}"
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "graph", "cartpole-ppo", "dataflow.inference=policy_worker", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]
    assert b"trainer:0" in data or suffix == ".png"


def test_srl_graph_prints_without_out():
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "graph", "cartpole-ppo"], capture_output=True, text=True)
    assert proc.returncode == 0 and "stream trainer.samples: actor:0 -> trainer:0" in proc.stdout, proc.stdout
    assert "bound by trainer:0; lossless, in order (slots)" in proc.stdout
