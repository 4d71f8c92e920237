"""Build the replay side of the dataflow (buffer worker, replay trainer) from the graph."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from srl.api import registry
from srl.data import columns as C
from srl.data.replay import ReplayMemory
from srl.data.sequences import segment_sequences
from srl.data.team import team_transitions
from srl.devices import resolve
from srl.graph import Graph, initial_policy, sub_arrays
from srl.streams.batches import BUFFER_BLOCK, Batch, BatchClient, BatchServer
from srl.streams.params import ParamPublisher
from srl.streams.samples import SampleConsumer
from srl.streams.transport import Transport
from srl.workers.buffer import BufferKernel
from srl.workers.replay_trainer import ReplayTrainerKernel
from srl.workers.wiring import segments_of


def _batch_slots(graph: Graph, transport: Transport) -> list[Batch]:
    replay = graph.config.replay
    assert replay is not None
    arrays = transport.arrays(BUFFER_BLOCK, graph.buffer_layout())
    return [sub_arrays(arrays, f"batch.{k}.") for k in range(replay.batch_slots)]


def make_buffer(graph: Graph, transport: Transport) -> BufferKernel:
    c, replay = graph.config, graph.config.replay
    assert replay is not None
    segments = segments_of(graph, transport, graph.actors_of_trainer(0))  # every actor: one buffer serves one trainer
    memory = ReplayMemory(graph.replay_fields(), replay.capacity, replay.prioritized, replay.alpha, replay.beta,
                          replay.priority_eps, seed=c.run.seed)
    items, steps_per_item = None, 1  # n-step transitions of single rows
    if C.HIDDEN in graph.policy_fields:  # whole sequences of single rows (srl.data.sequences)
        items, steps_per_item = segment_sequences, c.dataflow.sample_length
    elif graph.team_size:  # n-step transitions of whole teams (srl.data.team)
        items = partial(team_transitions, gamma=replay.gamma, n=replay.n_step, agents=graph.team_size)
        steps_per_item = graph.team_size
    return BufferKernel(
        SampleConsumer(transport, segments, tap=graph.tap_of("buffer:0")), BatchServer(transport, _batch_slots(graph, transport)), memory,
        gamma=replay.gamma, n_step=replay.n_step, warmup=replay.warmup, replay_ratio=replay.replay_ratio,
        items=items, steps_per_item=steps_per_item, num_agents=len(graph.agents), run_dir=Path(str(c.run.run_dir)), checkpoint_interval_s=c.run.checkpoint_interval_s,
        resume=c.run.resume is not None,
    )


def make_replay_trainer(graph: Graph, transport: Transport) -> ReplayTrainerKernel:
    c = graph.config
    policy = initial_policy(graph, resolve(c.devices.trainer))  # the same initial weights as the actors' copies
    algorithm = registry.algorithms.get(c.algorithm).algorithm_cls(policy, c.algo_config, c.stop.total_env_steps)
    return ReplayTrainerKernel(
        policy, algorithm, BatchClient(transport, _batch_slots(graph, transport)), ParamPublisher(transport),
        run_dir=Path(str(c.run.run_dir)), checkpoint_interval_s=c.run.checkpoint_interval_s,
        resume=c.run.resume is not None, max_updates=c.stop.max_updates, run_id=c.run.run_id, max_nonfinite_updates=c.launch.max_nonfinite_updates,
    )
