"""Build and check the dataflow of an experiment before any process starts; draw it.

    actor a --policy.{p}.requests--> policy worker p (= a mod P) --actor.{a}.replies--> actor a
    actor a --trainer.samples (trainer t = a mod N: trainer.{t}.samples)--> trainer t --actor.{a}.released--> actor a
    actor a --trainer.samples--> buffer --trainer.batches--> trainer --buffer.released--> buffer   (replay)
    trainer t <--gradients (torch.distributed all-reduce)--> trainer u   (num_trainers = N > 1)
    trainer 0 --params.in--> parameter service --params.out--> policy workers (actors with dataflow.inference=inline), eval
    every worker --controller.in--> controller --control.out--> every worker
    a samples stream's consumer --<samples stream>.tap--> extra workers that take "samples" (srl.api.worker)

`build_graph` is the one place that turns a config into workers and streams: each `StreamSpec`
is a stream as it runs (its transport name, the worker that binds it, who writes and reads it,
its largest message and its delivery). The builder (srl.graph.build), the tcp set-up
(srl.streams.tcp_setup), the launchers (which only decide where each worker runs) and `srl graph`
read it; tests/test_declared_streams.py checks that real runs open exactly these streams.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

from srl.api import registry
from srl.api.algorithm import Algorithm
from srl.api.policy import FieldSpec, Policy
from srl.config import ConfigError, ExperimentConfig
from srl.data import columns as C
from srl.graph.dataflow import (
    CONTROLLER,
    Delivery,
    StreamSpec,
    WorkerSpec,
    control_streams,
    custom_streams,
    extra_workers,
)
from srl.graph.default_policy import AUTO, PolicyChoice, choose_policy
from srl.graph.lanes import VERSION, lane_column, lane_spaces, map_agents, policy_config
from srl.graph.sizing import choice_lines
from srl.population.league_streams import with_league_streams
from srl.spaces import Obs, UnsupportedSpace, is_composite, leaf_fields, map_obs, obs_fields
from srl.streams.batches import BATCHES_NAME, RELEASED_NAME
from srl.streams.control import Role
from srl.streams.gradients import GRADIENTS
from srl.streams.inference import replies_name, requests_name
from srl.streams.layout import ArraySpec, Layout
from srl.streams.params import SERVICE, SERVICE_IN, SERVICE_OUT, relay_prefix, tensor_bytes
from srl.streams.samples import released_name, samples_name

if TYPE_CHECKING:
    import torch

    from srl.streams.gradients import GroupAddress


def space_spec(space: gym.Space) -> FieldSpec:
    """Per-row shape and dtype of a space's values on the wire."""
    if isinstance(space, gym.spaces.Discrete):
        return FieldSpec((), np.int64)
    if isinstance(space, gym.spaces.Box):
        # uint8 images travel as uint8 (a 210x160x3 frame: 100 kB, not 400 kB as float32);
        # policies convert their input to float (srl.models)
        dtype = np.uint8 if space.dtype == np.uint8 else np.float32
        return FieldSpec(tuple(space.shape), dtype)
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        # int64 like Discrete: the policies' categorical heads index with it as it is
        return FieldSpec(tuple(space.shape), np.int64)
    raise ConfigError(f"unsupported space {space}: srl supports Box, Discrete, MultiDiscrete and MultiBinary spaces")


def policy_name(config: ExperimentConfig, observation_space: gym.Space, action_space: gym.Space | None = None) -> str:
    """The policy that acts (srl.graph.default_policy: `auto` chosen by the spaces and algorithm; the
    MLP, which reads one Box, becomes multi-input for any other observation)."""
    return choose_policy(config, observation_space, action_space).name


def make_policy(config: ExperimentConfig, observation_space: gym.Space, action_space: gym.Space) -> Policy:
    factory = registry.policies.get(policy_name(config, observation_space, action_space))
    return factory(observation_space, action_space, **config.policy_kwargs)


def initial_policy(graph: Graph, device: torch.device | None = None) -> Policy:
    """The policy with the run's initial weights (made on the CPU from the run's seed, the same in
    every worker and launcher), on `device`."""
    import torch  # here only: nothing else in srl.graph needs torch

    torch.manual_seed(graph.config.run.seed)
    policy = make_policy(graph.config, graph.observation_space, graph.action_space)
    return policy if device is None else policy.to(device)


@dataclass
class Checked:
    """The policy, and the algorithm on it, that build_graph made to check the config (a policy that
    cannot act in the env, an algorithm that cannot train it, fail before launch); kept so that what
    only tries weights on them (a resume's checkpoints, a fixed policy's, srl eval's) builds neither
    again (each of them built its own before, only to load weights into it)."""

    policy: Policy
    algorithm: Algorithm | None = None  # None for a pod, whose trainer builds its own


@dataclass
class Graph:
    config: ExperimentConfig
    agents: tuple[str, ...]
    observation_space: gym.Space
    action_space: gym.Space
    policy_fields: dict[str, FieldSpec]
    workers: list[WorkerSpec] = field(default_factory=list)
    streams: list[StreamSpec] = field(default_factory=list)
    policy_inputs: dict[str, FieldSpec] = field(default_factory=dict)  # written by actors (Policy.input_fields)
    # num_trainers > 1: where each gradients stream's trainers meet, by stream name (set by the
    # launcher, srl.streams.gradients); a lane's are its own, under their names in the lane
    trainer_groups: dict[str, GroupAddress] = field(default_factory=dict)
    # transport=tcp: every worker's epoch when this worker was (re)started (srl.streams.incarnations)
    epochs: tuple[int, ...] = ()
    # transport=tcp, a restarted worker: the controller's clock (ns since the epoch) at its restart;
    # its receivers refuse what was sent before, meant for its dead predecessor (or recorded)
    restarted_ns: int = 0
    # a lane per policy, each a graph of its own (srl.graph.lanes): one policy is one lane under the run's
    # own names (the empty prefix); the run's graph holds the shared actors, the lanes' workers and
    # streams under the run's names
    lanes: list[Lane] = field(default_factory=list)
    # a lane's graph, as at_run gives it: every worker of the run (whose epochs it reads), and its workers' run names
    run_workers: tuple[str, ...] = ()
    # the policy that acts and why (srl.graph.default_policy); config.policy holds its name once built
    policy_choice: PolicyChoice = PolicyChoice("", "")
    names: dict[str, str] = field(default_factory=dict)
    # a lane of a policy that does not train: it acts with these weights (None: as it is made)
    trains: bool = True
    weights_file: str | None = None
    # dataflow.param_relay: each relayed subscriber's relay (its index), set by the launcher, which
    # knows where workers run (with_param_relays); the others subscribe to the service itself
    param_relays: dict[str, int] = field(default_factory=dict)
    # what build_graph made to check the config, for what only tries something on it (Checked)
    checked: Checked | None = field(default=None, repr=False, compare=False)

    def __getstate__(self) -> dict:
        """Sent to a worker (Ray) without the checked policy and algorithm: a worker builds its own."""
        return {**self.__dict__, "checked": None}

    def checked_models(self) -> tuple[Policy, Algorithm]:
        """The policy and algorithm build_graph checked, to try weights on (a resume's checkpoints,
        srl eval's); a pod's algorithm, which the checks leave to its trainer, is made here once."""
        import torch

        assert self.checked is not None, "build_graph keeps them; a worker's graph arrives without"
        if self.checked.algorithm is None:
            c = self.config
            with torch.random.fork_rng():  # made only to try weights on: leave torch's RNG as it was
                algorithm_cls = registry.algorithms.get(c.algorithm).algorithm_cls
                self.checked.algorithm = algorithm_cls(self.checked.policy, c.algo_config, c.stop.total_env_steps)
        return self.checked.policy, self.checked.algorithm

    @property
    def rows_per_split(self) -> int:
        return self.config.dataflow.envs_per_split * len(self.agents)

    @property
    def rows_per_batch(self) -> int:
        return self.rows_per_split * self.config.dataflow.batch_segments

    def policy_worker_of(self, actor: int) -> int:
        return actor % self.config.launch.num_policy_workers

    def actors_of(self, policy_worker: int) -> list[int]:
        return [a for a in range(self.config.launch.num_actor_workers) if self.policy_worker_of(a) == policy_worker]

    def trainer_of(self, actor: int) -> int:
        return actor % self.config.launch.num_trainers

    def actors_of_trainer(self, trainer: int) -> list[int]:
        return [a for a in range(self.config.launch.num_actor_workers) if self.trainer_of(a) == trainer]

    def slot_fields(self) -> dict[str, FieldSpec]:
        """What one inference slot row holds: obs, action and the policy's outputs."""
        return {
            **obs_fields(self.observation_space),  # "obs", or a column per leaf (srl.spaces)
            C.ACTION: space_spec(self.action_space),
            **self.policy_inputs,
            **self.policy_fields,
        }

    def segment_fields(self) -> dict[str, FieldSpec]:
        return {
            **self.slot_fields(),
            C.REWARD: FieldSpec((), np.float32),
            C.TERMINATED: FieldSpec((), np.bool_),
            C.TRUNCATED: FieldSpec((), np.bool_),
            C.POLICY_VERSION: FieldSpec((), np.int64),
        }

    def actor_layout(self) -> Layout:
        """One shared block per actor: its inference slots and its segment slots."""
        rows, steps = self.rows_per_split, self.config.dataflow.sample_length + 1
        arrays: dict[str, ArraySpec] = {}
        for s in range(self.config.dataflow.ring_splits):
            for name, spec in self.slot_fields().items():
                arrays[f"infer.{s}.{name}"] = ArraySpec((rows, *spec.shape), spec.dtype)
            arrays[f"infer.{s}.version"] = ArraySpec((1,), np.dtype(np.int64))
            for k in range(self.config.dataflow.segment_slots):
                for name, spec in self.segment_fields().items():
                    arrays[f"sample.{s}.{k}.{name}"] = ArraySpec((steps, rows, *spec.shape), spec.dtype)
        return Layout(arrays)

    @property
    def team_size(self) -> int:
        """Agents per replayed item where the algorithm learns from whole teams (srl.data.team), else 0."""
        return len(self.agents) if registry.algorithms.get(self.config.algorithm).algorithm_cls.team_transitions else 0

    def replay_fields(self) -> dict[str, FieldSpec]:
        """What the replay memory stores per item: an n-step transition (srl.data.replay), a
        team's (srl.data.team) or, for a recurrent policy, a whole sequence (srl.data.sequences)."""
        from srl.data.replay import transition_fields
        from srl.data.sequences import sequence_fields
        from srl.data.team import team_fields

        action = space_spec(self.action_space)
        if is_composite(self.observation_space):  # a column per leaf and side (srl.data.replay)
            if C.HIDDEN in self.policy_fields or self.team_size:
                raise ConfigError(composite_refused(self.config, "its replay stores whole sequences or teams"))
            return transition_fields(leaf_fields(self.observation_space), action)
        obs = space_spec(self.observation_space)
        if C.HIDDEN in self.policy_fields:  # recurrent: whole sequences with their start state
            return sequence_fields(obs, action, self.config.dataflow.sample_length, self.policy_fields[C.HIDDEN])
        if self.team_size:
            return team_fields(obs, action, self.team_size)
        return transition_fields(obs, action)

    def batch_fields(self) -> dict[str, FieldSpec]:
        """One replay batch row (buffer -> trainer): a stored item and the columns of its replay."""
        from srl.data.replay import replay_columns

        return {**self.replay_fields(), **replay_columns()}

    def buffer_layout(self) -> Layout:
        """The buffer worker's block: its batch slots."""
        replay = self.config.replay
        assert replay is not None
        arrays = {
            f"batch.{k}.{name}": ArraySpec((replay.batch_size, *spec.shape), spec.dtype)
            for k in range(replay.batch_slots)
            for name, spec in self.batch_fields().items()
        }
        return Layout(arrays)

    def block_layouts(self) -> dict[str, Layout]:
        from srl.streams.incarnations import INCARNATIONS_BLOCK, incarnations_layout

        restarts = {INCARNATIONS_BLOCK: incarnations_layout([w.name for w in self.workers])}
        return {**lane_blocks(self.lanes), **restarts}

    def own_blocks(self) -> dict[str, Layout]:
        """A lane's shared blocks: its actors' slots and its buffer's batches (a pod's: none)."""
        if self.config.pod.enabled:
            return {}
        layout = self.actor_layout()
        blocks = {actor_block(a): layout for a in range(self.config.launch.num_actor_workers)}
        if self.config.replay is not None:
            from srl.streams.batches import BUFFER_BLOCK

            blocks[BUFFER_BLOCK] = self.buffer_layout()
        return blocks

    def describe(self) -> str:
        c = self.config
        lines = [f"experiment {c.experiment}: env {c.env} agents={list(self.agents)}"]
        lines.append(f"  observation {self.observation_space}  action {self.action_space}")
        lines += [f"  {lane.line(self.agents)}" for lane in self.lanes]
        lines += [f"  {line}" for line in choice_lines(c)]  # the env backend; the machine's layout
        lines.append("  workers: " + " ".join(w.name + (f" ({w.kind})" if w.kind else "") for w in self.workers)
                     + " controller")
        for st in self.streams:
            lines.append(f"  stream {st.name}: {', '.join(st.producers)} -> {', '.join(st.consumers)}  "
                         f"[{st.payload}; bound by {st.owner}; {st.delivery.value}]")
        return "\n".join(lines)

    def of_kind(self, kind: str) -> list[StreamSpec]:
        return [s for s in self.streams if s.kind == kind]

    def tap_of(self, worker: str) -> str | None:
        """The tap `worker` publishes its samples' copies on, where extra workers take them."""
        return next((s.name for s in self.of_kind("tap") if s.owner == worker), None)

    def message_bytes(self, shares_memory: bool) -> dict[str, int]:
        """Each stream's largest packed message (srl.streams.wire); where memory is shared, slot
        streams carry only headers, so only the others are listed."""
        from srl.streams.wire import message_bytes

        return {s.name: message_bytes(s.frames) for s in self.streams
                if s.via == "transport" and not (shares_memory and s.in_flight)}


    def sockets_per_process(self) -> int:
        """The most sockets one process of the run opens: one per stream it takes part in, so a
        policy worker one per actor it serves (their replies) and a trainer one per actor it
        takes segments from (their releases). Every process's ZeroMQ context is sized by it
        (srl.streams.local.ZmqTransport): ZeroMQ's default of 1,023 stopped a run of 1,024 actors."""
        from collections import Counter

        counts = Counter(w for s in self.streams if s.via == "transport" for w in s.workers)
        return max(counts.values(), default=0)


def actor_block(actor: int) -> str:
    return f"actor{actor}"


def sub_arrays(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {name[len(prefix) :]: a for name, a in arrays.items() if name.startswith(prefix)}


def build_graph(config: ExperimentConfig) -> Graph:
    """Workers and streams of `config`, with every cross-field check that needs the spaces."""
    from srl.envs import describe_agents

    try:
        agents, observation_space, action_space, own = describe_agents(
            config.env, config.env_kwargs, config.env_backend, wrappers=config.env_wrappers
        )
    except UnsupportedSpace as e:
        raise ConfigError(f"field 'env': env {config.env!r}: {e}") from None
    except (registry.UnknownNameError, ValueError, TypeError, ImportError) as e:  # ImportError names the extra
        raise ConfigError(f"field 'env': {e}") from None
    try:
        obs_fields(observation_space)  # a VectorEnv of the user's may report any space
    except UnsupportedSpace as e:
        raise ConfigError(f"field 'env': env {config.env!r}: {e}") from None
    space_spec(action_space)
    if config.policies:
        return lanes_graph(config, tuple(agents), observation_space, action_space, own)
    if any(own[a] != own[agents[0]] for a in agents):
        spaces = {a: f"{o}" for a, (o, _) in own.items()}
        raise ConfigError(f"field 'env': the agents of env {config.env!r} observe spaces of different sizes ({spaces}); "
                          "one policy acts for all of them: give each kind its own (policies and policy_mapping)")
    return one_lane(graph_for(config, tuple(agents), observation_space, action_space))


def one_lane(graph: Graph) -> Graph:
    """The run's graph of one policy: a single lane for every agent under the empty prefix, so its
    streams, blocks, workers and checkpoints keep the run's own names; the run holds the lane's
    workers and streams as they are."""
    lane = Lane("", tuple(range(len(graph.agents))), graph)
    number_workers([lane])  # the identity: one lane's roles are numbered as its own
    return replace(graph, lanes=[lane])


def graph_for(config: ExperimentConfig, agents: tuple[str, ...], observation_space: gym.Space,
              action_space: gym.Space) -> Graph:
    """The one-policy dataflow of `config` for `agents` acting in these spaces. `policy: auto` is
    replaced by the policy it chose, so that config.yaml records it and a resume builds it again."""
    choice = choose_policy(config, observation_space, action_space)
    if config.policy == AUTO:
        config.policy = choice.name
    # what the workers build from config.policy (make_policy): an MLP chosen or named for an
    # observation that is not one Box acts as multi-input
    policy = _checked_policy(config, policy_name(config, observation_space, action_space), observation_space, action_space)
    if config.pod.enabled and policy.recurrent:
        raise ConfigError(f"field 'pod.enabled': policy {config.policy!r} is recurrent; pods run feed-forward policies only")
    graph = Graph(config, agents, observation_space, action_space, policy.rollout_fields(),
                  policy_inputs=policy.input_fields(), policy_choice=choice, checked=Checked(policy))
    _check_recurrent(graph, policy.recurrent)
    if config.pod.enabled:  # one worker, nothing streamed but its reports; an ensemble is K of them, pod:0 ..
        # pod:K-1, their evaluations in their reports and the manager's adopts on control.out (srl.population.ensemble)
        graph.workers = [WorkerSpec(Role.POD, k) for k in range(config.pod.ensemble.population)]
        # its reports attach each evaluation's weights and optimizer state, its adopts a leader's
        # (srl.workers.member): the weights, Adam's two moments of them, and room for the rest
        attached = 4 * sum(tensor_bytes(policy)) + (1 << 20) if config.pod.ensemble.population > 1 else 0
        graph.streams = control_streams(tuple(w.name for w in graph.workers), attached)
        _check_batch(graph)  # the rest of its config was checked by srl.config.checks
        return graph
    workers = [WorkerSpec(Role.ACTOR, a) for a in range(config.launch.num_actor_workers)]
    if config.dataflow.inference == "policy_worker":
        workers += [WorkerSpec(Role.POLICY, p) for p in range(config.launch.num_policy_workers)]
    if config.replay is not None:
        workers.append(WorkerSpec(Role.BUFFER, 0))
    workers += [WorkerSpec(Role.TRAINER, t) for t in range(config.launch.num_trainers)]
    workers.append(WorkerSpec(Role.PARAMS, 0))
    if config.eval.episodes:
        workers.append(WorkerSpec(Role.EVAL, 0))
    graph.workers = workers + extra_workers(config)
    graph.streams = declare_streams(graph, tuple(tensor_bytes(policy)))
    check_streams(graph)
    _check_batch(graph)
    _check_algorithm(graph, policy)
    return graph


def _checked_policy(config: ExperimentConfig, name: str, observation_space: gym.Space, action_space: gym.Space
                    ) -> Policy:
    """Policy `name` (chosen: graph_for), built once here so that a policy that cannot act in the env
    fails now, and checked with the algorithm and env (srl.config.compat) by what its class declares."""
    from srl.config.compat import check_combination

    try:
        factory = registry.policies.get(name)
        policy = factory(observation_space, action_space, **config.policy_kwargs)
    except registry.UnknownNameError as e:
        raise ConfigError(f"field 'policy': {e}") from None
    except (TypeError, ValueError) as e:
        check_combination(config, action_space, factory)  # a mismatch it names is the clearer message
        if isinstance(e, ValueError):
            raise ConfigError(f"field 'policy_kwargs': {e}") from None
        hint = f"; {composite_hint(config)}" if is_composite(observation_space) else ""
        raise ConfigError(
            f"field 'policy': {config.policy!r} cannot act in env {config.env!r} "
            f"(observation {observation_space}, action {action_space}): {e}{hint}"
        ) from None
    check_combination(config, action_space, policy)
    return policy


FLATTEN_WRAPPER = "gymnasium.wrappers.FlattenObservation"


def composite_hint(config: ExperimentConfig) -> str:
    """What takes a Dict or Tuple observation with the config's algorithm: the registered policies
    that read one (Policy.composite_observations), else the wrapper that makes it one Box."""
    from srl.config.compat import declared_class, fitting_policies

    readers = [n for n in fitting_policies(config.algorithm) if declared_class(registry.policies.get(n)).composite_observations]
    if readers:
        return f"Dict and Tuple observations take policy={' or '.join(readers)} with algorithm {config.algorithm!r}"
    return (f"algorithm {config.algorithm!r} has no policy that reads Dict or Tuple observations: flatten them into "
            f"one Box with env_wrappers=[{FLATTEN_WRAPPER}]")


def composite_refused(config: ExperimentConfig, why: str) -> str:
    """A Dict/Tuple observation that an algorithm cannot learn from: the field, why, the wrapper that works."""
    return (f"field 'algorithm': {config.algorithm!r} cannot learn from env {config.env!r}'s Dict or Tuple observation "
            f"({why}): flatten it into one Box with env_wrappers=[{FLATTEN_WRAPPER}]")


def declare_streams(graph: Graph, tensors: tuple[int, ...]) -> list[StreamSpec]:
    """Every stream a run of `graph` opens, under the name it opens it (the stream modules' names),
    wired by the graph's rules (`policy_worker_of`, `trainer_of`). `tensors`: the policy's."""
    c, T, rows = graph.config, graph.config.dataflow.sample_length, f"{graph.rows_per_split} rows"
    actor = graph.actor_layout().arrays
    infer, segment = _frames(actor, "infer.0."), _frames(actor, "sample.0.0.")
    segments_out = c.dataflow.ring_splits * c.dataflow.segment_slots  # an actor's segment slots: all may be out at once
    streams = []
    if c.dataflow.inference == "policy_worker":
        for p in range(c.launch.num_policy_workers):
            mine, server = graph.actors_of(p), f"policy:{p}"
            streams.append(StreamSpec(requests_name(p), "requests", server, _actors(mine), (server,), Delivery.SLOTS,
                                      f"obs ({rows})", infer, c.dataflow.ring_splits))
            streams += [StreamSpec(replies_name(a), "replies", f"actor:{a}", (server,), (f"actor:{a}",),
                                   Delivery.SLOTS, "actions, policy outputs", infer, c.dataflow.ring_splits) for a in mine]
    takers = ["buffer:0"] if c.replay is not None else [f"trainer:{t}" for t in range(c.launch.num_trainers)]
    for t, taker in enumerate(takers):
        mine = graph.actors_of_trainer(t)
        streams.append(StreamSpec(samples_name(t), "samples", taker, _actors(mine), (taker,), Delivery.SLOTS,
                                  f"segments of {T + 1} x {rows}", segment, segments_out))
        streams += [StreamSpec(released_name(a), "released", f"actor:{a}", (taker,), (f"actor:{a}",),
                               Delivery.SLOTS, "segment slots back", (), segments_out) for a in mine]
    if c.replay is not None:  # like segments, a batch slot comes back on release, here carrying the new priorities
        batch, n = _frames(graph.buffer_layout().arrays, "batch.0."), c.replay.batch_slots
        items = f" team transitions of {graph.team_size} agents" if graph.team_size else ""
        streams.append(StreamSpec(BATCHES_NAME, "batches", "trainer:0", ("buffer:0",), ("trainer:0",), Delivery.SLOTS,
                                  f"replay batches of {c.replay.batch_size}{items}", batch, n))
        streams.append(StreamSpec(RELEASED_NAME, "released", "buffer:0", ("trainer:0",), ("buffer:0",),
                                  Delivery.SLOTS, "batch slots back with |TD|", batch, n))
    if c.launch.num_trainers > 1:  # the controller serves the group's rendezvous (srl.streams.gradients)
        trainers = tuple(takers)
        streams.append(StreamSpec(GRADIENTS, "gradients", CONTROLLER, trainers, trainers, Delivery.COLLECTIVE,
                                  "gradients, averaged each update", via="torch.distributed"))
    subscribers = tuple(w.name for w in graph.workers if w.role in (Role.POLICY, Role.EVAL))
    if c.dataflow.inference == "inline":
        subscribers = _actors(range(c.launch.num_actor_workers)) + subscribers
    # trainer 0 publishes (it leads a group); subscribers ask the service for weights on it too
    streams.append(StreamSpec(SERVICE_IN, "params", SERVICE, ("trainer:0", *subscribers), (SERVICE,),
                              Delivery.NEWEST, "versioned weights", tensors))
    streams.append(StreamSpec(SERVICE_OUT, "params", SERVICE, (SERVICE,), subscribers, Delivery.NEWEST,
                              "versioned weights", tensors))
    streams += custom_streams(graph.workers, streams)
    return streams + control_streams(tuple(w.name for w in graph.workers))


def param_subscribers(graph: Graph) -> tuple[str, ...]:
    """The workers that take the service's parameters (params.out) in a graph without relays
    (none for a run of policy lanes or pods: they have no service of the run's own)."""
    out = next((st for st in graph.streams if st.name == SERVICE_OUT), None)
    return () if out is None else out.consumers


def with_param_relays(graph: Graph, groups: list[tuple[str, ...]]) -> Graph:
    """`graph` with a parameter relay (relay:h, srl.workers.params.ParamRelayKernel) for each group
    of subscribers in `groups` (the launcher's: one per host). Relay h subscribes to the service
    once, on params.in/params.out, and its group subscribes to it on relay{h}.params.in/out."""
    if not groups:
        return graph
    relays = [WorkerSpec(Role.RELAY, h) for h in range(len(groups))]
    relayed = {w: h for h, group in enumerate(groups) for w in group}
    names = tuple(r.name for r in relays)

    def keep(workers: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(w for w in workers if w not in relayed)

    streams = []
    for st in graph.streams:
        if st.name in (SERVICE_IN, SERVICE_OUT):
            st = replace(st, producers=keep(st.producers) + (names if st.name == SERVICE_IN else ()),
                         consumers=keep(st.consumers) + (names if st.name == SERVICE_OUT else ()))
        if st.kind == "control":
            continue
        streams.append(st)
    for h, (relay, group) in enumerate(zip(names, groups)):
        prefix = relay_prefix(h)
        streams.append(StreamSpec(prefix + SERVICE_IN, "params", relay, group, (relay,), Delivery.NEWEST,
                                  "versioned weights", _params_frames(graph)))
        streams.append(StreamSpec(prefix + SERVICE_OUT, "params", relay, (relay,), group, Delivery.NEWEST,
                                  "versioned weights", _params_frames(graph)))
    workers = [*graph.workers, *relays]
    streams += control_streams(tuple(w.name for w in workers))
    relayed_graph = replace(graph, workers=workers, streams=streams, param_relays=relayed)
    check_streams(relayed_graph)
    return relayed_graph


def _params_frames(graph: Graph) -> tuple[int, ...]:
    return next(st.frames for st in graph.streams if st.name == SERVICE_OUT)


def _actors(indices: Iterable[int]) -> tuple[str, ...]:
    return tuple(f"actor:{a}" for a in indices)


def _frames(arrays: dict[str, ArraySpec], prefix: str) -> tuple[int, ...]:
    """The byte sizes of one slot's arrays: the frames of a message that carries it whole."""
    return tuple(spec.nbytes for name, spec in arrays.items() if name.startswith(prefix))


def check_streams(graph: Graph) -> None:
    """Every stream has a producer and a consumer, and names only workers that exist."""
    known = {w.name for w in graph.workers} | {CONTROLLER}
    for st in graph.streams:
        if not st.producers or not st.consumers:
            side = "producer" if not st.producers else "consumer"
            raise ConfigError(f"stream {st.name!r} has no {side}: check the worker counts")
        unknown = sorted(set(st.workers) - known)
        if unknown:
            raise ConfigError(f"stream {st.name!r} names workers that do not exist: {unknown}")


def _check_batch(graph: Graph) -> None:
    """The algorithm's own check that a batch of this shape is usable (e.g. minibatch counts)."""
    c = graph.config
    entry = registry.algorithms.get(c.algorithm)
    try:
        entry.algorithm_cls.check_batch(c.algo_config, c.dataflow.sample_length, graph.rows_per_batch)
    except ValueError as e:
        raise ConfigError(f"batch of {c.dataflow.sample_length} steps x {graph.rows_per_batch} rows: {e}") from None


def _check_algorithm(graph: Graph, policy: Policy) -> None:
    """The algorithm, built once on the policy here so that what it needs of the policy (QMIX: the
    global state in its rows) fails now, not in a trainer restarted until it gives up."""
    c = graph.config
    try:
        algorithm = registry.algorithms.get(c.algorithm).algorithm_cls(policy, c.algo_config, c.stop.total_env_steps)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"field 'policy': algorithm {c.algorithm!r} cannot train policy {c.policy!r}: {e}") from None
    graph.checked = Checked(policy, algorithm)


def _check_recurrent(graph: Graph, recurrent: bool) -> None:
    """burn_in needs a recurrent policy; a recurrent one trains on whole segment rows."""
    c = graph.config
    burn_in, minibatches = getattr(c.algo_config, "burn_in", 0), getattr(c.algo_config, "num_minibatches", 1)
    if burn_in and not recurrent:
        raise ConfigError(f"field 'algo.burn_in': {burn_in} needs a recurrent policy, got {c.policy!r}")
    if recurrent and minibatches > graph.rows_per_batch:
        raise ConfigError(
            f"field 'algo.num_minibatches': {minibatches} exceeds the {graph.rows_per_batch} segment rows of a "
            f"batch; a recurrent policy ({c.policy!r}) splits a batch by rows, not transitions"
        )


# ---------------------------------------------------------------------------------------------
# Several policies (config `policies`): a lane per policy, see srl.graph.lanes


@dataclass
class Lane:
    name: str
    rows: tuple[int, ...]  # the agents it acts for, as indices into the run's agents
    graph: Graph  # its one-policy dataflow, under its own worker and stream names

    @property
    def prefix(self) -> str:
        """Before its streams' and blocks' names: "" for a run's one policy, whose names are the run's."""
        return f"{self.name}." if self.name else ""

    @property
    def spans_run(self) -> bool:
        """Whether it is the run's one policy, acting for every agent under the run's own names: the
        actors' slots are its own (nothing to copy between them, srl.workers.lanes)."""
        return self.prefix == ""

    def line(self, agents: tuple[str, ...]) -> str:
        """Its line in `srl graph`: the run's one policy, which and why (srl.graph.default_policy); else its
        agents, policy, algorithm and workers."""
        if self.spans_run:
            return self.graph.policy_choice.line()
        return (f"policy {self.name}: agents {[agents[i] for i in self.rows]} -> {self.graph.config.policy} "
                f"({self.graph.config.algorithm}), workers {sorted(self.names.values())}")

    @property
    def names(self) -> dict[str, str]:
        """Its workers' own names -> the run's (the shared actors keep theirs)."""
        return self.graph.names

    def own_obs(self, obs: Obs) -> Obs:
        """Its rows of the run's observation as its policy reads them: a vector padded to the
        longest agent's (srl.envs.vector) cut back to its length."""
        rows, space = list(self.rows), self.graph.observation_space
        if isinstance(obs, np.ndarray) and obs.ndim == 2 and isinstance(space, gym.spaces.Box):
            return obs[rows, : space.shape[0]]
        return map_obs(lambda a: a[rows], obs)

    def local(self, spec: WorkerSpec) -> WorkerSpec | None:
        """The lane's own spec of the run's worker `spec`, if it is one of the lane's."""
        mine = {v: k for k, v in self.names.items()}.get(spec.name)
        return None if mine is None else next(w for w in self.graph.workers if w.name == mine)

    def at_run(self, run: Graph) -> Graph:
        """Its graph with what the launcher set on the run's (the run's workers, relays included,
        whose epochs it reads; restart epochs and times; where its trainers meet)."""
        groups = {name.removeprefix(self.prefix): address for name, address in run.trainer_groups.items()
                  if name.startswith(self.prefix)}
        return replace(self.graph, epochs=run.epochs, restarted_ns=run.restarted_ns, trainer_groups=groups,
                       run_workers=tuple(w.name for w in run.workers))


def lane_outputs(graph: Graph) -> dict[str, FieldSpec]:
    """What a lane's policy writes or reads in an inference slot besides obs and action."""
    return {**graph.policy_inputs, **graph.policy_fields}


def number_workers(lanes: list[Lane]) -> list[WorkerSpec]:
    """The lanes' own workers (not the shared actors) under the run's names: each role numbered
    across the lanes, in lane order; fills each lane's `names`."""
    counts: dict[Role, int] = {}
    out = []
    for lane in lanes:
        for w in lane.graph.workers:
            if w.role == Role.ACTOR:
                continue
            index = counts.get(w.role, 0)
            counts[w.role] = index + 1
            run_spec = replace(w, index=index)
            lane.names[w.name] = run_spec.name
            out.append(run_spec)
    return out


def lane_streams(lanes: list[Lane], workers: tuple[str, ...]) -> list[StreamSpec]:
    """Each lane's streams under the run's names (its prefix, its workers' run names), then the
    control streams of every worker."""
    out = []
    for lane in lanes:
        rename = lane.names.get
        for st in lane.graph.streams:
            if st.kind == "control":
                continue
            out.append(replace(st, name=lane.prefix + st.name, owner=rename(st.owner, st.owner),
                               producers=tuple(rename(w, w) for w in st.producers),
                               consumers=tuple(rename(w, w) for w in st.consumers)))
    return out + control_streams(workers)


def lane_blocks(lanes: list[Lane]) -> dict[str, Layout]:
    """Each lane's shared blocks (its actors' slots, its buffer's batches) under its prefix."""
    return {lane.prefix + name: layout for lane in lanes for name, layout in lane.graph.own_blocks().items()}


def lane_of(lanes: list[Lane], worker: str) -> Lane | None:
    """The lane whose worker `worker` (a run name) is; None for the shared actors and the controller."""
    return next((lane for lane in lanes if worker in lane.names.values()), None)


def _acting_only(graph: Graph, name: str, weights_file: str | None) -> None:
    """A lane whose policy does not train: the actors' inference alone (its policy workers, or
    inline), with the weights of `weights_file`, which must load into its policy now."""
    from srl import checkpoint

    graph.workers = [w for w in graph.workers if w.role in (Role.ACTOR, Role.POLICY)]
    graph.streams = [s for s in graph.streams if s.kind in ("requests", "replies", "control")]
    graph.trains, graph.weights_file = False, weights_file
    if weights_file is not None:
        assert graph.checked is not None  # graph_for keeps the policy it checked: these weights must load into it
        policy = graph.checked.policy
        try:
            checkpoint.load_file(Path(weights_file), apply=lambda state: policy.load_state_dict(state["policy"]))
        except (checkpoint.CheckpointError, RuntimeError) as e:  # RuntimeError: another policy's shapes
            raise ConfigError(f"field 'policies.{name}.checkpoint': {e}") from None


def lanes_graph(config: ExperimentConfig, agents: tuple[str, ...], observation_space: gym.Space,
                action_space: gym.Space, own: dict[str, tuple[gym.Space, gym.Space]]) -> Graph:
    """The run's graph of a config with `policies`: a lane per policy over the agents mapped to it
    (each checked as a one-policy run of its own), the shared actors, the control streams."""
    lanes = []
    for name, rows in map_agents(config, agents).items():
        lane_obs, lane_action = lane_spaces(name, rows, agents, own)
        try:
            lane_graph = graph_for(policy_config(config, name), tuple(agents[i] for i in rows), lane_obs, lane_action)
        except ConfigError as e:  # a lane's own check: say whose
            raise ConfigError(f"policy {name!r}: {e}") from None
        if not config.policies[name].trains:
            _acting_only(lane_graph, name, config.policies[name].checkpoint)
        lanes.append(Lane(name, rows, lane_graph))
    chosen = {lane.graph.config.policy for lane in lanes if config.policies[lane.name].policy is None}
    if config.policy == AUTO and len(chosen) == 1:  # every lane that takes the run's policy chose the same:
        config.policy = chosen.pop()  # config.yaml records it (lanes that differ choose again from auto)
    # the actors' own slots hold every agent's rows: each lane's policy outputs and version in
    # columns of its own, which only its rows fill (srl.workers.lanes); episode starts in one for all
    columns = {lane_column(lane.name, k): spec for lane in lanes for k, spec in lane_outputs(lane.graph).items()}
    columns.update({lane_column(lane.name, VERSION): FieldSpec((), np.int64) for lane in lanes})
    if any(C.FIRST in lane.graph.policy_inputs for lane in lanes):  # the actor marks episode starts once for all
        columns[C.FIRST] = FieldSpec((), np.bool_)
    graph = Graph(config, agents, observation_space, action_space, columns, lanes=lanes)
    actors = [WorkerSpec(Role.ACTOR, a) for a in range(config.launch.num_actor_workers)]
    evaluator = [WorkerSpec(Role.EVAL, 0)] if config.eval.episodes else []  # the run's, over every lane (policy_config)
    graph.workers = actors + number_workers(lanes) + evaluator
    graph.streams = lane_streams(lanes, tuple(w.name for w in graph.workers))
    if evaluator:
        _subscribe(graph, evaluator[0].name)
    with_league_streams(graph)  # a league's snapshots and table, from the controller (srl.population)
    return graph


def _subscribe(graph: Graph, worker: str) -> None:
    """`worker` subscribes to every training lane's parameters, as its policy workers do (it asks
    for them on the lane's params.in, and takes them from its params.out)."""
    trained = [lane.prefix for lane in graph.lanes if lane.graph.trains]
    asks, takes = {p + SERVICE_IN for p in trained}, {p + SERVICE_OUT for p in trained}
    for k, st in enumerate(graph.streams):
        if st.name in asks:
            graph.streams[k] = replace(st, producers=(*st.producers, worker))
        elif st.name in takes:
            graph.streams[k] = replace(st, consumers=(*st.consumers, worker))
