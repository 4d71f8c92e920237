"""Build the replay side of the dataflow (buffer worker, replay trainer) from the graph."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import partial
from pathlib import Path

import numpy as np

from srl.api import registry
from srl.data import columns as C
from srl.data.her import EpisodeAssembler, HerReplayMemory
from srl.data.replay import ReplayMemory, Transitions
from srl.data.sequences import segment_sequences
from srl.data.team import team_transitions
from srl.devices import resolve
from srl.envs import make_vector_env, single_env_kwargs
from srl.envs.goals import find_goal_wrapper
from srl.envs.gym_env import GymVectorEnv
from srl.graph import Graph, initial_policy, sub_arrays
from srl.graph.wiring import segments_of
from srl.streams.batches import BUFFER_BLOCK, Batch, BatchClient, BatchServer
from srl.streams.params import ParamPublisher
from srl.streams.samples import SampleConsumer
from srl.streams.transport import Transport
from srl.workers.buffer import BufferKernel
from srl.workers.learner import LearnerSettings
from srl.workers.replay_trainer import ReplayTrainerKernel

Segment = dict[str, np.ndarray]
Items = Callable[[Segment, Hashable], Transitions]  # what the buffer stores of a segment from a lane


def _batch_slots(graph: Graph, transport: Transport) -> list[Batch]:
    replay = graph.config.replay
    assert replay is not None
    arrays = transport.arrays(BUFFER_BLOCK, graph.buffer_layout())
    return [sub_arrays(arrays, f"batch.{k}.") for k in range(replay.batch_slots)]


def make_buffer(graph: Graph, transport: Transport) -> BufferKernel:
    c, replay = graph.config, graph.config.replay
    assert replay is not None
    segments = segments_of(graph, transport, graph.actors_of_trainer(0))  # every actor: one buffer serves one trainer
    memory: ReplayMemory
    if replay.her is not None:  # whole episodes, goals relabelled as they are sampled (srl.data.her)
        memory = her_memory(graph)
    else:
        memory = ReplayMemory(graph.replay_fields(), replay.capacity, replay.prioritized, replay.alpha, replay.beta,
                              replay.priority_eps, seed=c.run.seed)
    items: Items | None = None  # n-step transitions of single rows
    steps_per_item = 1
    if replay.her is not None:
        items = EpisodeAssembler(replay.gamma)
    elif C.HIDDEN in graph.policy_fields:  # whole sequences of single rows (srl.data.sequences)
        items, steps_per_item = _any_lane(segment_sequences), c.dataflow.sample_length
    elif graph.team_size:  # n-step transitions of whole teams (srl.data.team)
        items = _any_lane(partial(team_transitions, gamma=replay.gamma, n=replay.n_step, agents=graph.team_size))
        steps_per_item = graph.team_size
    return BufferKernel(
        SampleConsumer(transport, segments, tap=graph.tap_of("buffer:0")), BatchServer(transport, _batch_slots(graph, transport)), memory,
        gamma=replay.gamma, n_step=replay.n_step, warmup=replay.warmup, replay_ratio=replay.replay_ratio,
        items=items, steps_per_item=steps_per_item, num_agents=len(graph.agents), run_dir=Path(str(c.run.run_dir)), checkpoint_interval_s=c.run.checkpoint_interval_s,
        resume=c.run.resume is not None,
    )


def _any_lane(items: Callable[[Segment], Transitions]) -> Items:
    """`items` as the buffer calls it, with the segment's lane (which only episodes need)."""
    return lambda segment, lane: items(segment)


def her_memory(graph: Graph) -> HerReplayMemory:
    """The hindsight memory of `graph`'s config: its goal layout and compute_reward from one env
    built here (kept open: compute_reward may read the env's state, e.g. a distance threshold)."""
    c, replay = graph.config, graph.config.replay
    assert replay is not None and replay.her is not None
    venv = make_vector_env(c.env, single_env_kwargs(c.env_kwargs, c.env_backend), 1, wrappers=c.env_wrappers)
    if not isinstance(venv, GymVectorEnv):
        venv.close()
        raise ValueError(f"replay.her needs a Gymnasium goal env; env {c.env!r} is built as {type(venv).__name__}")
    goals = find_goal_wrapper(venv.envs[0])
    return HerReplayMemory(graph.replay_fields(), replay.capacity, goals.layout, goals.compute_reward,
                           replay.her.strategy, replay.her.k, seed=c.run.seed)


def make_replay_trainer(graph: Graph, transport: Transport) -> ReplayTrainerKernel:
    c = graph.config
    policy = initial_policy(graph, resolve(c.devices.trainer))  # the same initial weights as the actors' copies
    algorithm = registry.algorithms.get(c.algorithm).algorithm_cls(policy, c.algo_config, c.stop.total_env_steps)
    return ReplayTrainerKernel(
        policy, algorithm, BatchClient(transport, _batch_slots(graph, transport)), ParamPublisher(transport),
        LearnerSettings.of(c),
    )
