"""Build and check the dataflow of an experiment before any process starts; draw it.

    actor i --inference slot (actor i, split s)--> policy worker (i mod P) --> actor i
    actor i --segment slot (actor i, split s, k)--> trainer (i mod N) --params--> parameter service
    trainer t <--gradients (torch.distributed all-reduce)--> trainer u   (num_trainers = N > 1)
    parameter service --params--> policy workers (or actors, with inference=inline)
    every worker --reports--> controller --stop--> every worker

`build_graph` is the one place that turns a config into workers and streams; launchers only
decide where each worker runs (placement), never what it is connected to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import gymnasium as gym
import numpy as np

from srl.api import registry
from srl.api.policy import FieldSpec, Policy
from srl.config import ConfigError, ExperimentConfig
from srl.data import columns as C
from srl.spaces import UnsupportedSpace, is_composite, obs_fields
from srl.streams.control import Role
from srl.streams.layout import ArraySpec, Layout

if TYPE_CHECKING:
    from srl.streams.gradients import GroupAddress


@dataclass(frozen=True)
class StreamSpec:
    """A declared stream: who writes it, who reads it, what travels (for checks and drawing)."""

    name: str
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    payload: str


@dataclass(frozen=True)
class WorkerSpec:
    role: Role
    index: int

    @property
    def name(self) -> str:
        return f"{self.role.title}:{self.index}"


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


def policy_name(config: ExperimentConfig, observation_space: gym.Space) -> str:
    """The policy that acts: the default MLP reads one Box, so for a Dict, Tuple or discrete
    observation it is the multi-input policy (srl.models.multi_input: an encoder per key, a CNN
    for images, then the same MLP heads), which is what a user of the default means there."""
    if config.policy == "actor-critic-mlp" and not isinstance(observation_space, gym.spaces.Box):
        return "multi-input"
    return config.policy


def make_policy(config: ExperimentConfig, observation_space: gym.Space, action_space: gym.Space) -> Policy:
    factory = registry.policies.get(policy_name(config, observation_space))
    return factory(observation_space, action_space, **config.policy_kwargs)


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
    # num_trainers > 1: where the trainers meet (set by the launcher, srl.streams.gradients)
    trainer_group: GroupAddress | None = None
    # transport=tcp: every worker's epoch when this worker was (re)started (srl.streams.incarnations)
    epochs: tuple[int, ...] = ()
    # transport=tcp, a restarted worker: the controller's clock (ns since the epoch) at its restart;
    # its receivers refuse what was sent before, meant for its dead predecessor (or recorded)
    restarted_ns: int = 0

    @property
    def rows_per_split(self) -> int:
        return self.config.envs_per_split * len(self.agents)

    @property
    def rows_per_batch(self) -> int:
        return self.rows_per_split * self.config.batch_segments

    def policy_worker_of(self, actor: int) -> int:
        return actor % self.config.num_policy_workers

    def actors_of(self, policy_worker: int) -> list[int]:
        return [a for a in range(self.config.num_actor_workers) if self.policy_worker_of(a) == policy_worker]

    def trainer_of(self, actor: int) -> int:
        return actor % self.config.num_trainers

    def actors_of_trainer(self, trainer: int) -> list[int]:
        return [a for a in range(self.config.num_actor_workers) if self.trainer_of(a) == trainer]

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
        rows, steps = self.rows_per_split, self.config.sample_length + 1
        arrays: dict[str, ArraySpec] = {}
        for s in range(self.config.ring_splits):
            for name, spec in self.slot_fields().items():
                arrays[f"infer.{s}.{name}"] = ArraySpec((rows, *spec.shape), spec.dtype)
            arrays[f"infer.{s}.version"] = ArraySpec((1,), np.dtype(np.int64))
            for k in range(self.config.segment_slots):
                for name, spec in self.segment_fields().items():
                    arrays[f"sample.{s}.{k}.{name}"] = ArraySpec((steps, rows, *spec.shape), spec.dtype)
        return Layout(arrays)

    def batch_fields(self) -> dict[str, FieldSpec]:
        """One replay batch row (buffer -> trainer), see srl.data.replay."""
        from srl.data.replay import batch_fields
        from srl.data.sequences import sequence_batch_fields

        obs, action = space_spec(self.observation_space), space_spec(self.action_space)
        if C.HIDDEN in self.policy_fields:  # recurrent: whole sequences with their start state
            return sequence_batch_fields(obs, action, self.config.sample_length, self.policy_fields[C.HIDDEN])
        return batch_fields(obs, action)

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
        if self.config.pod:
            return restarts
        layout = self.actor_layout()
        blocks = {actor_block(a): layout for a in range(self.config.num_actor_workers)}
        if self.config.replay is not None:
            from srl.streams.batches import BUFFER_BLOCK

            blocks[BUFFER_BLOCK] = self.buffer_layout()
        return {**blocks, **restarts}

    def describe(self) -> str:
        c = self.config
        lines = [f"experiment {c.experiment}: env {c.env} agents={list(self.agents)}"]
        lines.append(f"  observation {self.observation_space}  action {self.action_space}")
        acting = policy_name(c, self.observation_space)
        if acting != c.policy:
            lines.append(f"  policy {acting} (for {c.policy}, which reads one Box)")
        lines.append("  workers: " + " ".join(w.name for w in self.workers) + " controller")
        for st in self.streams:
            lines.append(f"  stream {st.name}: {', '.join(st.producers)} -> {', '.join(st.consumers)}  [{st.payload}]")
        return "\n".join(lines)


def actor_block(actor: int) -> str:
    return f"actor{actor}"


def sub_arrays(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {name[len(prefix) :]: a for name, a in arrays.items() if name.startswith(prefix)}


def build_graph(config: ExperimentConfig) -> Graph:
    """Workers and streams of `config`, with every cross-field check that needs the spaces."""
    from srl.envs import describe_spaces

    try:
        agents, observation_space, action_space = describe_spaces(
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
    policy = _checked_policy(config, observation_space, action_space)
    if config.pod and policy.recurrent:
        raise ConfigError(f"field 'pod': policy {config.policy!r} is recurrent; pods run feed-forward policies only")
    graph = Graph(config, tuple(agents), observation_space, action_space, policy.rollout_fields(),
                  policy_inputs=policy.input_fields())
    _check_recurrent(graph, policy.recurrent)
    if config.ensemble.population > 1 and not config.pod:
        raise ConfigError(f"field 'ensemble.population': {config.ensemble.population} pods need pod=true")
    if config.pod:
        return _pod_graph(graph)
    if config.inference == "policy_worker" and config.num_policy_workers > config.num_actor_workers:
        raise ConfigError(
            f"num_policy_workers ({config.num_policy_workers}) exceeds num_actor_workers "
            f"({config.num_actor_workers}): each policy worker serves at least one actor"
        )
    workers = [WorkerSpec(Role.ACTOR, a) for a in range(config.num_actor_workers)]
    if config.inference == "policy_worker":
        workers += [WorkerSpec(Role.POLICY, p) for p in range(config.num_policy_workers)]
    if config.replay is not None:
        workers.append(WorkerSpec(Role.BUFFER, 0))
    workers += [WorkerSpec(Role.TRAINER, t) for t in range(config.num_trainers)]
    workers.append(WorkerSpec(Role.PARAMS, 0))
    if config.eval_episodes:
        workers.append(WorkerSpec(Role.EVAL, 0))
    graph.workers = workers
    graph.streams = declare_streams(graph)
    check_streams(graph)
    _check_batch(graph)
    return graph


def _checked_policy(config: ExperimentConfig, observation_space: gym.Space, action_space: gym.Space) -> Policy:
    """The policy, built once here so that a policy that cannot act in the env fails now, and
    checked with the algorithm and env (srl.compat) by what its class declares."""
    from srl.compat import check_combination

    try:
        factory = registry.policies.get(policy_name(config, observation_space))
        policy = make_policy(config, observation_space, action_space)
    except registry.UnknownNameError as e:
        raise ConfigError(f"field 'policy': {e}") from None
    except (TypeError, ValueError) as e:
        check_combination(config, action_space, factory)  # a mismatch it names is the clearer message
        if isinstance(e, ValueError):
            raise ConfigError(f"field 'policy_kwargs': {e}") from None
        hint = ""
        if is_composite(observation_space):
            hint = "; Dict and Tuple observations take policy=multi-input (algorithms ppo, appo, impala)"
        raise ConfigError(
            f"field 'policy': {config.policy!r} cannot act in env {config.env!r} "
            f"(observation {observation_space}, action {action_space}): {e}{hint}"
        ) from None
    check_combination(config, action_space, policy)
    return policy


def _pod_graph(graph: Graph) -> Graph:
    """A pod: one worker, nothing streamed but its reports."""
    from srl.envs.batched import BATCHED_ENVS

    if graph.config.env not in BATCHED_ENVS:
        raise ConfigError(
            f"field 'env': pod=true needs a batched env ({', '.join(sorted(BATCHED_ENVS))}), got {graph.config.env!r}"
        )
    if graph.config.eval_episodes:
        raise ConfigError("field 'eval_episodes': the evaluator worker needs the dataflow; with pod=true set it to 0")
    if graph.config.nonfinite_env == "skip_episode":  # a pod checks each rollout whole (srl.workers.pod)
        raise ConfigError("field 'nonfinite_env': a pod cannot restart one env of its batch; with pod=true use 'error'")
    pods = [WorkerSpec(Role.POD, k) for k in range(graph.config.ensemble.population)]
    graph.workers = pods
    names = tuple(w.name for w in pods)
    graph.streams = [StreamSpec("control", names, ("controller",), "reports, heartbeats")]
    if len(pods) > 1:  # the tournament: evaluations up, copies of leaders down
        _check_ensemble(graph.config)
        graph.streams.append(StreamSpec("evals", names, ("controller",), "eval return, checkpoint"))
        graph.streams.append(StreamSpec("adopt", ("controller",), names, "checkpoint, perturbed hparams"))
    _check_batch(graph)
    return graph


def _check_ensemble(config: ExperimentConfig) -> None:
    """Perturbed hyperparameters must be float fields of the algorithm's config (x1.25 of an int
    field such as epochs would not be one)."""
    if config.resume is not None:
        raise ConfigError("field 'resume': an ensemble (ensemble.population > 1) cannot resume yet; "
                          "start a new run (its leaderboard checkpoints are in leaderboard/)")
    numeric = sorted(n for n, v in config.algo_config.model_dump().items() if isinstance(v, float))
    bad = [n for n in config.ensemble.perturb if n not in numeric]
    if bad:
        raise ConfigError(
            f"field 'ensemble.perturb': {bad} are not float hyperparameters of algorithm "
            f"{config.algorithm!r}; allowed: {', '.join(numeric)}"
        )


def declare_streams(graph: Graph) -> list[StreamSpec]:
    """The streams the workers of `graph` are wired with (srl.workers.build follows the same rules)."""
    c = graph.config
    actors = [f"actor:{a}" for a in range(c.num_actor_workers)]
    rows = f"{graph.rows_per_split} rows"
    streams = []
    if c.inference == "policy_worker":
        for p in range(c.num_policy_workers):
            mine = tuple(f"actor:{a}" for a in graph.actors_of(p))
            streams.append(StreamSpec(f"inference.{p}", mine, (f"policy:{p}",), f"obs -> action ({rows})"))
    T = c.sample_length
    if c.replay is None and c.num_trainers == 1:
        streams.append(StreamSpec("samples", tuple(actors), ("trainer:0",), f"segments of {T + 1} x {rows}"))
    elif c.replay is None:  # each trainer its share of the actors
        trainers = tuple(f"trainer:{t}" for t in range(c.num_trainers))
        for t, trainer in enumerate(trainers):
            mine = tuple(f"actor:{a}" for a in graph.actors_of_trainer(t))
            streams.append(StreamSpec(f"samples.{t}", mine, (trainer,), f"segments of {T + 1} x {rows}"))
        streams.append(StreamSpec("gradients", trainers, trainers, "all-reduce (torch.distributed) per step"))
    else:
        streams.append(StreamSpec("samples", tuple(actors), ("buffer:0",), f"segments of {T + 1} x {rows}"))
        # like segments, a batch slot comes back on release, here carrying the new priorities
        streams.append(StreamSpec("batches", ("buffer:0",), ("trainer:0",),
                                  f"replay batches of {c.replay.batch_size}; |TD| back on release"))
    subscribers = tuple(actors) if c.inference == "inline" else tuple(f"policy:{p}" for p in range(c.num_policy_workers))
    if c.eval_episodes:
        subscribers += ("eval:0",)
    streams.append(StreamSpec("params.in", ("trainer:0",), ("params:0",), "versioned weights"))
    streams.append(StreamSpec("params.out", ("params:0",), subscribers, "versioned weights"))
    everyone = tuple(w.name for w in graph.workers)
    streams.append(StreamSpec("control", everyone, ("controller",), "reports, heartbeats"))
    return streams


def check_streams(graph: Graph) -> None:
    """Every stream has a producer and a consumer, and names only workers that exist."""
    known = {w.name for w in graph.workers} | {"controller"}
    for st in graph.streams:
        if not st.producers or not st.consumers:
            side = "producer" if not st.producers else "consumer"
            raise ConfigError(f"stream {st.name!r} has no {side}: check the worker counts")
        unknown = sorted(set(st.producers + st.consumers) - known)
        if unknown:
            raise ConfigError(f"stream {st.name!r} names workers that do not exist: {unknown}")


def _check_batch(graph: Graph) -> None:
    """The algorithm's own check that a batch of this shape is usable (e.g. minibatch counts)."""
    c = graph.config
    entry = registry.algorithms.get(c.algorithm)
    try:
        entry.algorithm_cls.check_batch(c.algo_config, c.sample_length, graph.rows_per_batch)
    except ValueError as e:
        raise ConfigError(f"batch of {c.sample_length} steps x {graph.rows_per_batch} rows: {e}") from None


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
