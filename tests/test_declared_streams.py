"""Real runs open exactly the streams srl.graph declares: the same names, bound by the declared
owner, connected to by every other worker the stream names, and nothing else (every process
records what its transport opened: srl.launch.shell.record_opened)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import srl.streams.samples
from srl.api import Worker, register_worker
from srl.config.load import load_config
from srl.graph import Graph, build_graph
from srl.launch.run import run_experiment

STEPS = ["stop.total_env_steps=1500", "stop.target_return=null", "monitor.display=off"]
POLICY_WORKERS = ["dataflow.inference=policy_worker", "launch.num_actor_workers=2", "launch.num_policy_workers=2", "eval.episodes=1",
                  "eval.interval_s=0.2"]  # fmt: skip
TRAINERS = ["dataflow.inference=inline", "launch.num_actor_workers=2", "launch.num_trainers=2"]
REPLAY = ["launch.num_actor_workers=2", "replay.warmup=64", "replay.batch_size=32"]
EXTRA = ["extra_workers=[{kind: segment-counter, count: 2}, {kind: count-sink}]"]
PREY_EXTRA = ["extra_workers=[{kind: segment-counter, count: 2, policy: prey}, {kind: count-sink, policy: prey}]"]


@register_worker("segment-counter", inputs=("samples",), outputs=("counts",))
class SegmentCounter(Worker):
    """Counts the segments it is given a copy of and sends the count on."""

    def poll(self) -> bool:
        segments = self.inputs["samples"].poll()
        if segments:
            self.outputs["counts"].send((self.index, len(segments)), [np.float32(segments[0]["reward"].sum()).tobytes()])
        return bool(segments)


@register_worker("count-sink", inputs=("counts",))
class CountSink(Worker):
    """Adds up the counters' counts; writes the total at the end."""

    def start(self) -> None:
        self.total = 0

    def poll(self) -> bool:
        messages = self.inputs["counts"].recv_all()
        self.total += sum(m.header[1] for m in messages)
        return bool(messages)

    def close(self) -> None:
        (self.run_dir / "segments_counted").write_text(str(self.total))


def declared(graph: Graph) -> dict[str, set[tuple[str, str]]]:
    """Each process -> (stream, bind or connect) of every stream the graph names it in."""
    out = defaultdict(set)
    for stream in graph.streams:
        for worker in stream.workers:
            out[worker].add((stream.name, "bind" if worker == stream.owner else "connect"))
    return dict(out)


def opened(run_dir: Path) -> dict[str, set[tuple[str, str]]]:
    return {p.stem: {tuple(e) for e in json.loads(p.read_text())} for p in (run_dir / "streams").glob("*.json")}


def run_and_compare(experiment: str, overrides: list[str], run_dir: Path, monkeypatch) -> tuple[dict, dict]:
    config = load_config(experiment, [*overrides, *STEPS, "launch.launcher=local", f"run.run_dir={run_dir}",
                                      "debug.record_streams=true"])
    assert run_experiment(config) == 0
    return declared(build_graph(config)), opened(run_dir)


@pytest.mark.parametrize("transport", ["shm", "tcp"])
@pytest.mark.parametrize(
    "experiment,overrides",
    [("cartpole-ppo", POLICY_WORKERS + EXTRA), ("cartpole-ppo", TRAINERS), ("cartpole-dqn", REPLAY + EXTRA),
     ("cartpole-pod", []), ("cartpole-pod-ensemble", ["pod.ensemble.population=2", "dataflow.envs_per_actor=16"]),
     ("mpe-tag", ["dataflow.inference=policy_worker", "launch.num_actor_workers=2", "dataflow.envs_per_actor=4",
                  "policies.predator.num_trainers=2", "eval.episodes=1", "eval.interval_s=0.2", *PREY_EXTRA]),
     ("mpe-tag", ["algorithm=dqn", "algo=!{}", "policy=q-mlp", "replay={batch_size: 32, warmup: 64}",
                  "dataflow.envs_per_actor=4"])],
    ids=["policy-workers", "trainers", "replay", "pod", "ensemble", "two-policies", "two-policies-replay"],
)
def test_runs_open_exactly_the_declared_streams(experiment, overrides, transport, run_dir, monkeypatch):
    want, got = run_and_compare(experiment, [*overrides, f"dataflow.transport={transport}"], run_dir, monkeypatch)
    assert got == want, {w: (sorted(got.get(w, set()) ^ want.get(w, set()))) for w in set(got) | set(want)}
    if EXTRA[0] in overrides:  # the taps and the counters' own stream carried something
        assert int((run_dir / "segments_counted").read_text()) > 0
    if PREY_EXTRA[0] in overrides:  # they tapped the prey's samples, and wrote in the prey's directory
        assert int((run_dir / "policies" / "prey" / "segments_counted").read_text()) > 0


def test_a_stream_opened_under_an_undeclared_name_is_caught(run_dir, monkeypatch):
    """The comparison can fail: the actors' release streams renamed where the streams open them
    (the forked workers inherit the patch), not where the graph declares them."""
    monkeypatch.setattr(srl.streams.samples, "released_name", lambda actor: f"actor.{actor}.freed")
    want, got = run_and_compare("cartpole-ppo", [], run_dir, monkeypatch)
    assert want != got
    assert ("actor.0.freed", "bind") in got["actor:0"] - want["actor:0"]
    assert ("actor.0.released", "connect") in want["trainer:0"] - got["trainer:0"]
