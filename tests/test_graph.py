"""The dataflow graph: declared streams, checks before launch, text and drawn output."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from srl.config import ConfigError
from srl.graph import StreamSpec, build_graph, check_streams
from srl.load import load_config


def graph_of(*overrides: str):
    return build_graph(load_config("cartpole-ppo", list(overrides)))


def test_streams_follow_the_worker_counts():
    graph = graph_of("inference=policy_worker", "num_actor_workers=3", "num_policy_workers=2")
    streams = {s.name: s for s in graph.streams}
    assert streams["inference.0"].producers == ("actor:0", "actor:2")
    assert streams["inference.1"].consumers == ("policy:1",)
    assert streams["samples"].producers == ("actor:0", "actor:1", "actor:2")
    assert streams["params.out"].consumers == ("policy:0", "policy:1")
    inline = {s.name: s for s in graph_of("inference=inline", "num_actor_workers=2").streams}
    assert "inference.0" not in inline and inline["params.out"].consumers == ("actor:0", "actor:1")


def test_a_stream_without_consumer_or_with_unknown_workers_is_an_error():
    graph = graph_of()
    graph.streams.append(StreamSpec("orphan", ("actor:0",), (), "nothing"))
    with pytest.raises(ConfigError, match="'orphan' has no consumer"):
        check_streams(graph)
    graph.streams[-1] = dataclasses.replace(graph.streams[-1], consumers=("policy:7",))
    with pytest.raises(ConfigError, match="do not exist"):
        check_streams(graph)


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
        [sys.executable, "-m", "srl.cli", "graph", "cartpole-ppo", "inference=policy_worker", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]
    assert b"trainer:0" in data or suffix == ".png"


def test_srl_graph_prints_without_out():
    proc = subprocess.run([sys.executable, "-m", "srl.cli", "graph", "cartpole-ppo"], capture_output=True, text=True)
    assert proc.returncode == 0 and "stream samples: actor:0 -> trainer:0" in proc.stdout
