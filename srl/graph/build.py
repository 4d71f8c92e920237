"""Build one worker's kernel, wired to its streams, from the graph. Every launcher calls this."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from srl.api import registry
from srl.api.policy import Policy
from srl.config import ExperimentConfig
from srl.devices import cpu_count, resolve
from srl.envs import make_vector_env, single_env_kwargs
from srl.envs.native_backends import backend_choice
from srl.graph import Graph, Lane, WorkerSpec, initial_policy, lane_of, lane_outputs
from srl.graph.sizing import env_threads
from srl.graph.wiring import (
    acting,
    actor_arrays,
    incarnations,
    policy_and_params,
    policy_ports,
    segments_of,
    split_actor_arrays,
)
from srl.monitor.timing import TimeBreakdown
from srl.spaces import obs_fields
from srl.streams.control import Role
from srl.streams.gradients import GRADIENTS, GradientGroup
from srl.streams.inference import InferenceServer, Slot
from srl.streams.params import FixedParams, ParamPublisher, ParamSubscriber, relay_prefix, relay_streams, tensor_bytes
from srl.streams.prefixed import PrefixedTransport, RenamedTransport
from srl.streams.samples import SampleConsumer, SampleProducer
from srl.streams.transport import Transport
from srl.workers.actor import ActorKernel, InferencePort, SampleSink
from srl.workers.kernel import Kernel
from srl.workers.lanes import LanesPort, LanesProducer, lane_rows
from srl.workers.learner import LearnerSettings
from srl.workers.nonfinite import SKIP_EPISODE, EnvGuard, SkipLimit
from srl.workers.params import ParamRelayKernel, ParamServiceKernel
from srl.workers.policy import PolicyWorkerKernel
from srl.workers.stop import LockStepStop, StopRules
from srl.workers.trainer import TrainerKernel

if TYPE_CHECKING:
    from srl.evaluation import Player


def actor_env_kwargs(c: ExperimentConfig) -> dict[str, Any]:
    """env_kwargs of an actor's ring groups: where EnvPool steps them and the config names no
    num_threads, each pool gets the actor's share of this machine's cores (srl.graph.sizing.env_threads);
    by EnvPool's own default each of 16 actors' pools would start one thread per core."""
    if "num_threads" in c.env_kwargs or backend_choice(c.env, c.env_kwargs, c.env_backend)[0] != "envpool":
        return c.env_kwargs
    threads = env_threads(cpu_count(), c.launch.num_actor_workers, c.dataflow.envs_per_split)
    return {**c.env_kwargs, "num_threads": threads}


def make_actor(graph: Graph, transport: Transport, actor: int) -> ActorKernel:
    c = graph.config
    epoch = incarnations(graph, transport).of(f"actor:{actor}")
    flow = c.dataflow
    groups = range(actor * flow.ring_splits, (actor + 1) * flow.ring_splits)  # global group indices
    kwargs = actor_env_kwargs(c)
    envs = [make_vector_env(c.env, kwargs, flow.envs_per_split, g * flow.envs_per_split, c.env_backend,
                            wrappers=c.env_wrappers) for g in groups]
    clock = TimeBreakdown()  # inline inference charges its forward passes to the actor's clock
    port, samples, infer = actor_ports(graph, transport, actor, clock)
    # a restarted actor (epoch > 0) plays new episodes rather than replaying its first life's
    seeds = [c.run.seed * 1_000_003 + g * flow.envs_per_split + epoch * 1_000_000_007 for g in groups]
    skips = SkipLimit(c.env, actor, flow.max_skipped_fraction) if flow.nonfinite_env == SKIP_EPISODE else None
    guards = [EnvGuard(flow.nonfinite_env, c.env, g * flow.envs_per_split, len(graph.agents), actor, skips)
              for g in groups]
    return ActorKernel(envs, port, samples, infer, flow.sample_length, seeds, lock_step=c.run.deterministic, clock=clock,
                       guards=guards, info_keys=tuple(c.monitor.info_keys))


def actor_ports(graph: Graph, transport: Transport, actor: int, clock: TimeBreakdown
                ) -> tuple[InferencePort, SampleSink, list[Slot]]:
    """An actor's inference port, sample sink and inference slots over the run's lanes. The lane of
    a run's one policy spans every row under the run's names: its slots are the actor's, its ports
    the actor's own. Otherwise each lane's part (its slots, inference and sample producer, on its
    streams) stands beside the actor's slots of every agent's rows, in its memory, and a
    `LanesPort` / `LanesProducer` hands each lane its agents' rows (srl.workers.lanes)."""
    first = graph.lanes[0]
    if first.spans_run:
        port, producer, infer = policy_ports(first.at_run(graph), transport, actor, clock)
        assert producer is not None  # the run's one policy trains
        return port, producer, infer
    full_obs = {k: s.shape for k, s in obs_fields(graph.observation_space).items()}
    lanes, ports, lane_slots = [], [], []
    producers: list[SampleProducer | None] = []
    for lane in graph.lanes:
        lg, view = lane.at_run(graph), PrefixedTransport(transport, lane.prefix)
        port, producer, lane_infer = policy_ports(lg, view, actor, clock)
        lane_obs = {k: s.shape for k, s in obs_fields(lg.observation_space).items()}
        factory = registry.policies.get(lg.config.policy)  # a league's tag: its opponent (srl.population.league_pool)
        tag = factory.episode_tag if isinstance(factory, type) and issubclass(factory, Policy) else None
        lanes.append(lane_rows(lane.name, lane.rows, len(graph.agents), graph.config.dataflow.envs_per_split, full_obs,
                               lane_obs, tuple(lane_outputs(lg)), tag))
        ports.append(port)
        producers.append(producer)
        lane_slots.append(lane_infer)
    arrays = {name: np.zeros(spec.shape, spec.dtype) for name, spec in graph.actor_layout().arrays.items()}
    infer, segments = split_actor_arrays(graph, arrays)
    return (LanesPort(lanes, ports, lane_slots, infer),
            LanesProducer(lanes, producers, segments, [len(lane.rows) for lane in graph.lanes]), infer)


def _make_trainer(graph: Graph, spec: WorkerSpec, transport: Transport) -> TrainerKernel:
    """Trainer `spec.index` of `num_trainers`: its share of the actors' segment slots, and its
    place in the gradient group when there are several."""
    c = graph.config
    mine = graph.actors_of_trainer(spec.index)
    policy = initial_policy(graph, resolve(c.devices.trainer, spec.index))  # before the algorithm: its optimizer's
    lives = incarnations(graph, transport)
    algorithm = registry.algorithms.get(c.algorithm).algorithm_cls(policy, c.algo_config, c.stop.total_env_steps)
    group = None
    if graph.of_kind("gradients"):
        if GRADIENTS not in graph.trainer_groups:
            raise RuntimeError("num_trainers > 1 needs the launcher's trainer group store (launch.launcher=local or ray)")
        device = next(policy.parameters()).device
        # epochs of a group's trainers move together (restarted as one): the group's generation
        group = GradientGroup(graph.trainer_groups[GRADIENTS], spec.index, lives.of(spec.name), device,
                              c.launch.heartbeat_timeout_s)
        transport.note_opened(GRADIENTS, "connect")  # joined at the controller's rendezvous
    leader = group is None or group.leader
    publisher = ParamPublisher(transport, generation=lives.of(spec.name), incarnations=lives) if leader else None
    return TrainerKernel(
        policy,
        algorithm,
        SampleConsumer(transport, segments_of(graph, transport, mine), lives, trainer=spec.index, tap=graph.tap_of(spec.name)),
        publisher,
        fields=graph.segment_fields(),
        sample_length=c.dataflow.sample_length,
        batch_segments=c.dataflow.batch_segments,
        rows_per_segment=graph.rows_per_split,
        num_agents=len(graph.agents),
        settings=LearnerSettings.of(c),
        splits_per_actor=c.dataflow.ring_splits if c.run.deterministic else None,
        group=group,
        actors=mine,
        stop=lock_step_stop(c),
    )


def _make_evaluator(graph: Graph, transport: Transport) -> Kernel:
    """The run's evaluator: each lane's policy, on its lane's streams."""
    from srl.workers.evaluator import EvaluatorKernel

    c, device = graph.config, resolve(graph.config.devices.eval)
    # env ids past every training env's, so its episodes are not theirs
    env = make_vector_env(c.env, single_env_kwargs(c.env_kwargs, c.env_backend), 1,
                          c.launch.num_actor_workers * c.dataflow.envs_per_actor, wrappers=c.env_wrappers)
    players = [_player(lane, *policy_and_params(lane.at_run(graph), lane_transport(lane, transport), device))
               for lane in graph.lanes]
    return EvaluatorKernel(players, env, seed=c.run.seed * 1_000_003 + 999_983, episodes=c.eval.episodes,
                           interval_s=c.eval.interval_s)


def _player(lane: Lane, policy: Policy, params: ParamSubscriber | FixedParams) -> Player:
    """A lane's player in the evaluator: the run's one policy acts for every row of the env as it
    is (Player's direct path), another lane for its own rows."""
    from srl.evaluation import Player

    if lane.spans_run:
        return Player(policy, params)
    return Player(policy, params, name=lane.name, rows=list(lane.rows), own=lane.own_obs)


def lane_transport(lane: Lane, transport: Transport) -> Transport:
    """The process's transport as a lane's workers open it: under the lane's prefix (the run's
    one policy: as it is, no wrapper on its path)."""
    return transport if lane.spans_run else PrefixedTransport(transport, lane.prefix)


def lock_step_stop(c: ExperimentConfig) -> LockStepStop | None:
    """Deterministic mode: whoever trains decides the stop from what it trained on (srl.workers.stop)."""
    return LockStepStop(StopRules.of(c.stop)) if c.run.deterministic else None


def make_kernel(graph: Graph, spec: WorkerSpec, transport: Transport) -> Kernel:
    relay = graph.param_relays.get(spec.name)
    if relay is not None:  # its host's relay serves its parameters (srl.graph.with_param_relays)
        transport = RenamedTransport(transport, relay_streams(relay))
    if spec.role == Role.ACTOR:
        return make_actor(graph, transport, spec.index)
    if spec.role == Role.EVAL:
        return _make_evaluator(graph, transport)
    if spec.role == Role.RELAY:
        served = PrefixedTransport(transport, relay_prefix(spec.index))  # its host's subscribers' streams
        return ParamRelayKernel(transport, served, tensor_bytes(initial_policy(graph)))
    # a policy's own worker: built from its lane's graph, on its lane's streams
    lane = lane_of(graph.lanes, spec.name)
    local = None if lane is None else lane.local(spec)
    if lane is None or local is None:
        raise ValueError(f"worker {spec.name} is in no policy's lane")
    return _lane_kernel(lane.at_run(graph), local, lane_transport(lane, transport))


def _lane_kernel(graph: Graph, spec: WorkerSpec, transport: Transport) -> Kernel:
    """Worker `spec` of a policy's lane (its own names), as in a run of that policy alone."""
    c = graph.config
    if spec.role == Role.POLICY:
        actors = graph.actors_of(spec.index)
        slots = {(a, s): slot for a in actors for s, slot in enumerate(actor_arrays(graph, transport, a)[0])}
        server = InferenceServer(transport, spec.index, actors, incarnations(graph, transport), slots=slots)
        return PolicyWorkerKernel(acting(graph, transport, resolve(c.devices.policy, spec.index)), server, slots)
    if spec.role == Role.BUFFER:
        from srl.graph.build_replay import make_buffer

        return make_buffer(graph, transport)
    if spec.role == Role.TRAINER and c.replay is not None:
        from srl.graph.build_replay import make_replay_trainer

        return make_replay_trainer(graph, transport)
    if spec.role == Role.TRAINER:
        return _make_trainer(graph, spec, transport)
    if spec.role == Role.PARAMS:
        return ParamServiceKernel(transport, tensor_bytes(initial_policy(graph)))  # takes only this policy's weights
    if spec.role == Role.CUSTOM:
        from srl.workers.custom import make_custom

        return make_custom(graph, spec, transport)
    if spec.role == Role.POD and c.pod.ensemble.population > 1:
        from srl.workers.member import make_member

        return make_member(c, spec.index)  # evaluates itself, adopts a leader's copy (srl.population.ensemble)
    if spec.role == Role.POD:
        from srl.workers.pod import make_pod

        return make_pod(
            env=c.env, num_envs=c.dataflow.envs_per_actor, sample_length=c.dataflow.sample_length, algo=c.algo_config,
            algorithm=c.algorithm, policy=c.policy, policy_kwargs=c.policy_kwargs, env_kwargs=c.env_kwargs,
            total_env_steps=c.stop.total_env_steps, seed=c.run.seed, device=resolve(c.pod.device),
            settings=LearnerSettings.of(c), stop=lock_step_stop(c), cuda_graphs=c.pod.cuda_graphs,
        )
    raise ValueError(f"unknown role {spec.role}")
