"""What every worker's builder reads of the graph and its transport: the workers' epochs, an
actor's slots, the policy an actor or policy worker acts with and its exploration
(srl.graph.build and the builders beside it)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from srl import checkpoint
from srl.algos.colored_noise import ColoredActionNoise
from srl.algos.exploration import EpsilonGreedy, EpsilonGreedyConfig, slot_epsilons
from srl.algos.sac import SACConfig
from srl.api.policy import Policy
from srl.devices import resolve
from srl.graph import Graph, actor_block, initial_policy, sub_arrays
from srl.monitor.timing import TimeBreakdown
from srl.population.league_pool import LeaguePool
from srl.population.league_streams import LeagueParams
from srl.streams.incarnations import INCARNATIONS_BLOCK, Incarnations, incarnations_layout
from srl.streams.inference import InferenceClient, Slot
from srl.streams.params import FixedParams, ParamSubscriber, tensor_bytes
from srl.streams.samples import SampleProducer, Segment
from srl.streams.transport import Transport
from srl.workers.actor import InferencePort
from srl.workers.policy import Acting, LocalInferenceClient


def actor_arrays(graph: Graph, transport: Transport, actor: int) -> tuple[list[Slot], dict[tuple[int, int], Segment]]:
    return split_actor_arrays(graph, transport.arrays(actor_block(actor), graph.actor_layout()))


def split_actor_arrays(graph: Graph, arrays: dict[str, np.ndarray]) -> tuple[list[Slot], dict[tuple[int, int], Segment]]:
    """An actor block's arrays (graph.actor_layout) as its inference slots (per split) and segment
    slots (per split, slot)."""
    splits, slots = range(graph.config.dataflow.ring_splits), range(graph.config.dataflow.segment_slots)
    infer = [sub_arrays(arrays, f"infer.{s}.") for s in splits]
    segments = {(s, k): sub_arrays(arrays, f"sample.{s}.{k}.") for s in splits for k in slots}
    return infer, segments


def segments_of(graph: Graph, transport: Transport, actors: list[int]) -> dict[tuple[int, int, int], Segment]:
    """The segment slots of these actors by (actor, split, slot): what a trainer or the buffer takes."""
    return {(a, s, k): seg for a in actors for (s, k), seg in actor_arrays(graph, transport, a)[1].items()}


def incarnations(graph: Graph, transport: Transport) -> Incarnations:
    """The epochs of every worker (the controller bumps one on each restart); a policy's lane
    (srl.graph.lanes) reads the run's under its own workers' names."""
    names = list(graph.run_workers) or [w.name for w in graph.workers]
    epochs = transport.arrays(INCARNATIONS_BLOCK, incarnations_layout(names))["epoch"]
    if graph.epochs and not transport.shares_memory:  # tcp: a restarted worker starts from the controller's copy
        np.maximum(epochs, graph.epochs, out=epochs)
    return Incarnations(names, epochs).renamed(graph.names)


def acting(graph: Graph, transport: Transport, device: torch.device, clock: TimeBreakdown | None = None) -> Acting:
    c = graph.config
    seed = c.run.seed if c.run.deterministic else None
    policy, params = policy_and_params(graph, transport, device)
    return Acting(policy, params, sampling_seed=seed, clock=clock, exploration=make_exploration(graph),
                  action_noise=make_action_noise(graph), graphs=c.devices.policy_graphs)


def policy_and_params(graph: Graph, transport: Transport, device: torch.device
                      ) -> tuple[Policy, ParamSubscriber | FixedParams]:
    """The policy a worker acts with and where its newest weights come from: the parameter
    service, or, for a policy that only acts (srl.graph._acting_only), the weights it was made or
    loaded with."""
    policy = initial_policy(graph, device)
    if graph.trains:
        return policy, ParamSubscriber(transport, policy)
    if isinstance(policy, LeaguePool):  # its snapshots come from the controller (srl.population.league_streams)
        return policy, LeagueParams(transport, tensor_bytes(policy.make()))
    if graph.weights_file is not None:
        checkpoint.load_file(Path(graph.weights_file), apply=lambda state: policy.load_state_dict(state["policy"]))
    return policy, FixedParams()


def policy_ports(graph: Graph, transport: Transport, actor: int, clock: TimeBreakdown
                 ) -> tuple[InferencePort, SampleProducer | None, list[Slot]]:
    """An actor's inference port (its policy worker, or inline), sample producer and inference
    slots for the policy of `graph` (the run's, or one lane's over its prefixed transport); no
    producer for a lane whose policy only acts (it has no samples stream)."""
    c = graph.config
    lives = incarnations(graph, transport)
    infer, segments = actor_arrays(graph, transport, actor)
    if c.dataflow.inference == "inline":
        port: InferencePort = LocalInferenceClient(acting(graph, transport, resolve(c.devices.actor), clock), infer, actor)
    else:
        port = InferenceClient(transport, actor, graph.policy_worker_of(actor), lives, slots=infer)
    producer = SampleProducer(transport, actor, segments, lives, trainer=graph.trainer_of(actor)) if graph.trains else None
    return port, producer, infer


def make_action_noise(graph: Graph) -> ColoredActionNoise | None:
    """SAC's colored exploration noise where actions are chosen, if the config asks for it (beta > 0)."""
    settings = graph.config.algo_config
    if not isinstance(settings, SACConfig) or settings.action_noise_beta == 0:
        return None
    return ColoredActionNoise(settings.action_noise_beta, settings.action_noise_period_steps,
                              gym.spaces.flatdim(graph.action_space), seed=graph.config.run.seed + 104729)


def make_exploration(graph: Graph) -> EpsilonGreedy | None:
    """Per-env epsilon-greedy (Ape-X) where actions are chosen, if the config asks for it."""
    c, settings = graph.config, graph.config.algo_config
    if not isinstance(settings, EpsilonGreedyConfig) or settings.epsilon is None:
        return None
    space = graph.action_space
    assert isinstance(space, gym.spaces.Discrete)
    eps = slot_epsilons(settings.epsilon, settings.epsilon_alpha, c.launch.num_actor_workers, c.dataflow.ring_splits,
                        c.dataflow.envs_per_split, len(graph.agents))
    return EpsilonGreedy(eps, int(space.n), int(space.start), seed=c.run.seed + 7919,
                         anneal_env_steps=settings.epsilon_anneal_env_steps, epsilon_start=settings.epsilon_start,
                         run_envs=c.launch.num_actor_workers * c.dataflow.ring_splits * c.dataflow.envs_per_split)
