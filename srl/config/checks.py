"""Every check of the config that spans fields, in one place, before any process starts.

`build_config` validates a config dict field by field (srl.config.schema's models), then `check_config`
raises one ConfigError naming the field and what is allowed. Both live here, not in the schema,
which these checks build on. What needs the env's spaces (rows per segment,
batch sizes, the policy's kind) is checked where the graph is built (srl.graph, srl.config.compat).
"""

from __future__ import annotations

import importlib.util
import inspect
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from srl import devices
from srl.api import registry
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.config import (
    ConfigError,
    ExperimentConfig,
    ReplayConfig,
    format_error,
    import_modules,
    lock_step_batch_segments,
    translate_moved,
    with_cwd_on_path,
)
from srl.envs.native_backends import backend_choice, vector_entry_point
from srl.graph.default_policy import AUTO
from srl.graph.sizing import machine_layout


def build_config(values: dict[str, Any]) -> ExperimentConfig:
    """Validate a full config dict as given (old keys moved here, its `modules` imported here);
    `algo` is checked against the algorithm's own config class."""
    values = translate_moved(values)
    import_modules(values.get("modules", []))
    return typed_config(values)


def typed_config(values: dict[str, Any]) -> ExperimentConfig:
    """`build_config` of values already read: old keys moved (srl.config.overrides.translate_moved)
    and their `modules` imported. srl.config.load reads each input once, so a load translates the
    overrides and imports each module once (it did both twice, once more here)."""
    import srl.builtins  # noqa: F401  (registers built-in envs, policies, algorithms)

    values = dict(values)
    algo_values = values.pop("algo", {}) or {}
    try:
        config = ExperimentConfig.model_validate(values)
    except ValidationError as e:
        raise ConfigError(format_error(e, "", ExperimentConfig)) from None
    try:
        entry = registry.algorithms.get(config.algorithm)
    except registry.UnknownNameError as e:
        raise ConfigError(f"field 'algorithm': {e}") from None
    if isinstance(algo_values, AlgorithmConfig):
        algo_values = algo_values.model_dump()
    try:
        config.algo = entry.config_cls.model_validate(algo_values)
    except ValidationError as e:
        raise ConfigError(format_error(e, "algo.", entry.config_cls)) from None
    algorithm_defaults(config)
    machine_defaults(config)
    check_config(config)
    return config


def machine_defaults(config: ExperimentConfig) -> None:
    """launch.layout=machine: the actors' count, size and niceness that the config leaves unset,
    from this machine (srl.graph.sizing.machine_layout); num_actor_workers rounded up to a multiple of
    num_trainers. Not for an inline run, a pod, or a Ray cluster (ray_address: not this machine)."""
    launch = config.launch
    if launch.layout != "machine" or launch.launcher == "inline" or config.pod.enabled or launch.ray_address:
        return
    from srl.devices import cpu_count

    backend, _ = backend_choice(config.env, config.env_kwargs, config.env_backend)
    gpu = any(devices.resolve(name).type == "cuda" for name in (config.devices.trainer, config.devices.policy))
    layout = machine_layout(cpu_count(), gpu, "batched" if backend in ("vector", "envpool") else "loop")
    if "num_actor_workers" not in launch.model_fields_set:
        launch.num_actor_workers = -(-layout.num_actor_workers // launch.num_trainers) * launch.num_trainers
    if "envs_per_actor" not in config.dataflow.model_fields_set:
        config.dataflow.envs_per_actor = layout.envs_per_actor
    if "actor_niceness" not in launch.model_fields_set:
        launch.actor_niceness = layout.actor_niceness


def algorithm_defaults(config: ExperimentConfig) -> None:
    """What `algorithm=<name>` alone brings (Algorithm.default_policy, default_replay), where the
    config leaves it unset: the policy that fits the algorithm, and for a replay algorithm a
    `replay` with a finite replay ratio. A `replay` given without replay_ratio (`replay: {}`) gets
    the algorithm's updates per stored transition, scaled to its batch_size: with none the
    trainer updated as fast as it could (36,403 updates from 4,384 transitions of a 15 steps/s env,
    issue 37). `replay_ratio: null` set on purpose is kept (as fast as the trainer goes). Other
    fields the `replay` leaves unset take the algorithm's values too."""
    algo = registry.algorithms.get(config.algorithm).algorithm_cls
    given = config.model_fields_set
    if algo.default_policy is not None and "policy" not in given and not config.policies:
        config.policy = algo.default_policy
    if not algo.needs_replay or config.pod.enabled:
        return
    if config.replay is None and "replay" not in given:
        config.replay = ReplayConfig(**algo.default_replay)
    elif config.replay is not None:  # the fields it leaves unset take the algorithm's values
        config.replay = _replay_with_defaults(config.replay, algo.default_replay)


def _replay_with_defaults(replay: ReplayConfig, defaults: dict[str, Any]) -> ReplayConfig:
    """`replay`'s fields set, the algorithm's `defaults` for the others (SAC's uniform 1-step replay
    under a `replay: {batch_size: 64}`); an unset replay_ratio keeps the algorithm's updates per
    stored transition at this batch size."""
    given = replay.model_dump(include=replay.model_fields_set)
    values = {**{k: v for k, v in defaults.items() if k != "replay_ratio"}, **given}
    ratio = defaults.get("replay_ratio")
    if "replay_ratio" not in given and ratio is not None:
        batch_size = values.get("batch_size", ReplayConfig.model_fields["batch_size"].default)
        values["replay_ratio"] = ratio / defaults.get("batch_size", batch_size) * batch_size
    try:
        return ReplayConfig.model_validate(values)
    except ValidationError as e:
        raise ConfigError(format_error(e, "replay.", ReplayConfig)) from None

def check_config(config: ExperimentConfig) -> None:
    """Raise the first problem found; then derive what run.deterministic=true fixes."""
    for check in _CHECKS:
        if (problem := check(config)) is not None:
            raise ConfigError(problem)
    if config.run.deterministic:  # derived: every update is one segment from each ring group, none dropped
        flow = config.dataflow
        flow.batch_segments = lock_step_batch_segments(config.launch, flow)
        flow.max_policy_lag = max(flow.max_policy_lag, 1)


def _names(config: ExperimentConfig) -> str | None:
    """The registered names the config chooses (its algorithm's: build_config, which types `algo` by it)."""
    named: list[tuple[str, registry.Registry[Any], str]] = []
    if config.policy != AUTO:  # auto is chosen where the spaces are known (srl.graph.default_policy)
        named.append(("policy", registry.policies, config.policy))
    named += [(f"extra_workers[{i}].kind", registry.workers, w.kind) for i, w in enumerate(config.extra_workers)]
    for field, table, name in named:
        try:
            table.get(name)
        except registry.UnknownNameError as e:
            return f"field {field!r}: {e}"
    return None


def _env(config: ExperimentConfig) -> str | None:
    from srl.envs import wrappers

    with_cwd_on_path()  # a wrapper in the current directory is found, as modules= finds one
    for i, entry in enumerate(config.env_wrappers):
        try:
            wrappers.check(entry.path, entry.kwargs)  # imported here, not where an experiment is only listed
        except ValueError as e:
            return f"field 'env_wrappers': entry {i} ({entry.path!r}): {e}"
    backend = config.env_backend
    if config.env_wrappers and backend in ("vector", "envpool"):
        return (f"field 'env_backend': {backend!r} steps all envs in one call, and env_wrappers wrap each env on its "
                "own: use env_backend=loop (or auto), or leave env_wrappers empty")
    if config.env_wrappers and config.env in registry.envs and config.env != "gymnasium":
        from srl.envs import wrappers_need_gymnasium

        return f"field 'env_wrappers': {wrappers_need_gymnasium(config.env)}"
    if backend == "envpool" and importlib.util.find_spec("envpool") is None:
        return "field 'env_backend': 'envpool' needs EnvPool, which is not installed: pip install 'srl[envpool]'"
    if backend == "vector" and vector_entry_point(config.env) is None:
        return (f"field 'env_backend': 'vector' needs a Gymnasium id with a vector entry point (CartPole-v1); env "
                f"{config.env!r} has none: use env_backend='loop' (or 'envpool' for EnvPool's ids)")
    return None


def _dataflow(config: ExperimentConfig) -> str | None:
    flow, launch = config.dataflow, config.launch
    if flow.envs_per_actor % flow.ring_splits:
        return (f"field 'dataflow.envs_per_actor': {flow.envs_per_actor} must be a multiple of "
                f"dataflow.ring_splits ({flow.ring_splits})")
    if flow.transport == "tcp" and launch.launcher == "inline":
        return "field 'dataflow.transport': 'tcp' needs launch.launcher='local' or 'ray', got launch.launcher='inline'"
    relay = _param_relay(config)
    if relay:
        return relay
    burn_in = getattr(config.algo, "burn_in", 0)
    if burn_in >= flow.sample_length:
        return (f"field 'algo.burn_in': {burn_in} must be less than sample_length ({flow.sample_length}): "
                "burn-in steps carry no loss, so a segment needs steps after them")
    if flow.inference == "policy_worker" and launch.num_policy_workers > launch.num_actor_workers:
        return (f"field 'launch.num_policy_workers': {launch.num_policy_workers} exceeds num_actor_workers "
                f"({launch.num_actor_workers}): each policy worker serves at least one actor")
    return None


def _param_relay(config: ExperimentConfig) -> str | None:
    """per_host relays the one policy's parameter service to workers in processes of their own."""
    flow, launch = config.dataflow, config.launch
    field = "field 'dataflow.param_relay': 'per_host'"
    if flow.param_relay != "per_host":
        return None
    if launch.launcher == "inline":
        return f"{field} needs launch.launcher='local' or 'ray' (one process has no hosts), got launch.launcher='inline'"
    if launch.launcher == "ray" and flow.transport != "tcp":
        return f"{field} with launch.launcher='ray' needs dataflow.transport='tcp' (with 'shm' every worker is on one host)"
    if config.policies or config.pod.enabled:
        what = "policies" if config.policies else "pod.enabled=true"
        return f"{field} relays the run's one parameter service; a run with {what} has none: use 'auto' or 'off'"
    return None


def _replay_and_trainers(config: ExperimentConfig, field: str = "launch.num_trainers") -> str | None:
    """Replay and several trainers both need the actor/trainer dataflow; trainers one process each.
    `field`: where the trainer count was given (a policy's own: policies.<name>.num_trainers)."""
    n, pod, det = config.launch.num_trainers, config.pod.enabled, config.run.deterministic
    if config.replay is not None and (det or pod):
        return (f"field 'replay': it needs the actor/buffer/trainer dataflow: it cannot run with "
                f"run.deterministic={det} or pod.enabled={pod}")
    if n == 1:
        return None
    if config.replay is not None:
        return f"field {field!r}: {n} cannot run with replay: one buffer worker serves one trainer"
    if pod:
        return f"field {field!r}: {n} cannot run with pod.enabled=true: a pod is its own trainer"
    if config.launch.launcher == "inline":
        return f"field {field!r}: {n} needs one process per trainer: launch.launcher='local' or 'ray', not 'inline'"
    if config.launch.num_actor_workers % n:
        return (f"field {field!r}: {n} must divide launch.num_actor_workers ({config.launch.num_actor_workers}): "
                "each trainer takes the segments of an equal share of the actors (a smaller share would hold the "
                "group back)")
    return _shared_gpu(config, field)


def _shared_gpu(config: ExperimentConfig, field: str) -> str | None:
    """Trainers of a group on CUDA need one GPU each: NCCL refuses two ranks on one device at the
    group's first collective (after every worker started). Refused here rather than run on gloo,
    which would stage every gradient through host memory: the fixes are named. Under Ray each
    trainer sees the GPUs Ray gave it (CUDA_VISIBLE_DEVICES), which only the cluster knows."""
    n, name = config.launch.num_trainers, config.devices.trainer
    if config.launch.launcher == "ray" or devices.problem(name) is not None:
        return None  # Ray: the cluster's GPUs; a bad name: _devices says why
    placed = [devices.resolve(name, t) for t in range(n)]
    if placed[0].type != "cuda" or len(set(placed)) == n:
        return None
    count = devices.cuda_count()
    shared = f"all {n} on {placed[0]}" if len(set(placed)) == 1 else f"{n} trainers on {len(set(placed))} of them"
    return (f"field {field!r}: {n} trainers with devices.trainer={name} would share a GPU ({shared}; this machine has "
            f"{count} CUDA device(s)), and NCCL refuses two trainers on one GPU; use launch.num_trainers <= {count} "
            f"with devices.trainer=cuda (trainer i on cuda:i), or devices.trainer=cpu (gloo)")


def _lock_step(config: ExperimentConfig) -> str | None:
    """A deterministic run stops where its trainer decides from what it trained on (srl.workers.stop)."""
    if not config.run.deterministic:
        return None
    if (limit := config.stop.time_limit_s) is not None:
        return (f"field 'stop.time_limit_s': {limit} cannot stop a run.deterministic=true run in lock step (the update "
                "reached in a time depends on the machine); set stop.time_limit_s=null and stop by max_updates, "
                "total_env_steps or target_return")
    if config.stop.target_on == "eval":
        return ("field 'stop.target_on': eval cannot stop a run.deterministic=true run in lock step (the evaluator "
                "plays beside the dataflow, at its own pace); use stop.target_on=training or run.deterministic=false")
    population = config.pod.ensemble.population
    if config.pod.enabled and population > 1:
        return (f"field 'run.deterministic': true cannot run an ensemble (ensemble.population={population}): its "
                "tournament follows the members' timing; use pod.ensemble.population=1 or run.deterministic=false")
    return None


def _resume(config: ExperimentConfig) -> str | None:
    """start_fresh is what a resume does without a checkpoint: asked for without one, it names nothing."""
    if config.run.if_no_checkpoint == "start_fresh" and config.run.resume is None:
        return ("field 'run.if_no_checkpoint': start_fresh applies to run.resume=RUN_DIR (a run to continue), which "
                "is not set; a launch without it starts from scratch anyway")
    return None


def _eval_target(config: ExperimentConfig) -> str | None:
    """stop.target_on=eval reads the evaluator worker's rounds."""
    if config.stop.target_on == "eval" and not config.eval.episodes:
        return ("field 'stop.target_on': eval holds target_return against the evaluator's rounds; set eval.episodes "
                "to the episodes per round (e.g. eval.episodes=10), or use stop.target_on=training")
    return None


def _pod(config: ExperimentConfig) -> str | None:
    """A pod has no actors, streams or evaluator worker."""
    population = config.pod.ensemble.population
    if not config.pod.enabled:
        return f"field 'pod.ensemble.population': {population} pods need pod.enabled=true" if population > 1 else None
    from srl.envs.batched import BATCHED_ENVS

    if config.env not in BATCHED_ENVS:
        return f"field 'env': pod.enabled=true needs a batched env ({', '.join(sorted(BATCHED_ENVS))}), got {config.env!r}"
    if config.eval.episodes:
        return "field 'eval.episodes': the evaluator worker needs the dataflow; with pod.enabled=true set it to 0"
    if config.dataflow.nonfinite_env == "skip_episode":  # a pod checks each rollout whole (srl.workers.pod)
        return "field 'dataflow.nonfinite_env': a pod cannot restart one env of its batch; with pod.enabled=true use 'error'"
    if config.extra_workers:
        return "field 'extra_workers': they take the dataflow's streams, which pod.enabled=true has not"
    if config.pod.cuda_graphs == "on" and not str(devices.resolve(config.pod.device)).startswith("cuda"):
        return (f"field 'pod.cuda_graphs': 'on' captures CUDA graphs, and pod.device={config.pod.device!r} is not "
                "CUDA here; allowed: auto (graphs where the device is CUDA) or off")
    return _ensemble(config) if population > 1 else None


def _devices(config: ExperimentConfig) -> str | None:
    """Device names, and CUDA asked for where there is none (srl.devices). Under Ray the workers'
    nodes may have GPUs that the driver's lacks: only the names are checked there. The local
    launcher forks its workers, and a child cannot use CUDA that its parent initialised."""
    named = {"pod.device": config.pod.device, **{f"devices.{role}": name for role, name in config.devices if role != "policy_graphs"}}
    for field, name in named.items():
        if (why := devices.problem(name, here=config.launch.launcher != "ray")) is not None:
            return f"field {field!r}: {why}"
    used = devices_used(config)
    if config.launch.launcher == "local" and torch_cuda_initialized() and any(d.startswith("cuda") for d in used.values()):
        return (f"field 'launch.launcher': local forks its workers, and CUDA is already initialised in this process, "
                f"so a forked worker could not use it ({used}); start the run from a new process, or use launch.launcher=inline")
    return None


def devices_used(config: ExperimentConfig) -> dict[str, str]:
    """What each role of `config` runs on, as resolved here (summary.json). Under Ray with
    `ray_address`, workers on other nodes resolve `auto` against their own GPUs."""
    if config.pod.enabled:
        return {"pod": str(devices.resolve(config.pod.device))}
    roles = {"trainer": config.devices.trainer}
    roles.update({"policy": config.devices.policy} if config.dataflow.inference == "policy_worker" else {"actor": config.devices.actor})
    roles.update({"eval": config.devices.eval} if config.eval.episodes > 0 else {})
    return {role: str(devices.resolve(name)) for role, name in roles.items()}


def torch_cuda_initialized() -> bool:
    import torch

    return torch.cuda.is_initialized()


def _ensemble(config: ExperimentConfig) -> str | None:
    """Perturbed hyperparameters must be float fields of the algorithm's config (x1.25 of an int
    field such as epochs would not be one). (Members may run on any node: their weights travel
    with their reports and adopts, srl.workers.member.)"""
    numeric = sorted(n for n, v in config.algo_config.model_dump().items() if isinstance(v, float))
    bad = [n for n in config.pod.ensemble.perturb if n not in numeric]
    if bad:
        return (f"field 'pod.ensemble.perturb': {bad} are not float hyperparameters of algorithm "
                f"{config.algorithm!r}; allowed: {', '.join(numeric)}")
    return None


def _policies(config: ExperimentConfig) -> str | None:
    """`policies` and `policy_mapping` come together, the mapping names only policies there are,
    each policy's names and hyperparameters are valid; what lanes do not carry yet is refused."""
    if not config.policies and not config.policy_mapping:
        placed = [k for k, w in enumerate(config.extra_workers) if w.policy is not None]
        if placed:
            return (f"field 'extra_workers[{placed[0]}].policy': a one-policy run's extra workers join its one "
                    "dataflow; leave it out (it names one of several policies)")
        return None
    if not config.policies or not config.policy_mapping:
        given, missing = ("policies", "policy_mapping") if config.policies else ("policy_mapping", "policies")
        return (f"field {missing!r}: {given} needs it: `policies` names each policy, `policy_mapping` maps agent "
                "names or patterns to them, e.g. policy_mapping={'adversary_*': predator, 'agent_*': prey}")
    unknown = {pattern: p for pattern, p in config.policy_mapping.items() if p not in config.policies}
    if unknown:
        return f"field 'policy_mapping': {unknown} name no policy; policies: {sorted(config.policies)}"
    if config.pod.enabled:
        return "field 'pod.enabled': a run with several policies (policies) does not take it yet; set it for a one-policy run"
    trains = sorted(n for n, s in config.policies.items() if s.trains)
    if not trains:
        return "field 'policies': none of them trains (trainable: true for at least one)"
    for k, extra in enumerate(config.extra_workers):
        if extra.policy not in trains:
            return (f"field 'extra_workers[{k}].policy': {extra.policy!r}; with several policies each extra worker "
                    f"joins one that trains: {trains}")
    from srl.graph.lanes import policy_config

    leagues = sorted(n for n, s in config.policies.items() if s.league is not None)
    if len(leagues) > 1:  # the controller keeps one league's table (srl.population.keeper): a second would be lost
        return (f"field 'policies.{leagues[1]}.league': one league per run; policies {leagues} each play one. Keep "
                f"one, or give the others fixed opponents (trainable: false, checkpoint: ...)")
    for name, spec in config.policies.items():
        if spec.league is not None and spec.league.of not in trains:
            return (f"field 'policies.{name}.league.of': {spec.league.of!r} is no policy that trains; policies that do: "
                    f"{trains}")
        if spec.league is not None and spec.league.scripted:
            from srl.models.scripted import scripted_names

            scripted = scripted_names()
            not_scripted = [n for n in spec.league.scripted if n not in scripted]
            if not_scripted:
                return (f"field 'policies.{name}.league.scripted': {not_scripted} are no registered scripted "
                        f"policies; allowed: {scripted}")
        if spec.league is not None and (config.policies[spec.league.of].policy or config.policy) == AUTO:
            return (f"field 'policies.{spec.league.of}.policy': the league of {name!r} keeps snapshots of it, so its "
                    "network is named, not auto (e.g. policy: mappo)")
        if spec.checkpoint is not None and spec.trainable:
            return (f"field 'policies.{name}.checkpoint': a policy that trains starts from the run's own checkpoints "
                    "(run.resume); set trainable: false to act with these weights")
        try:
            if (spec.policy or config.policy) != AUTO:
                registry.policies.get(spec.policy or config.policy)
            lane = policy_config(config, name)
        except registry.UnknownNameError as e:
            return f"field 'policies.{name}.policy': {e}"
        except ConfigError as e:
            return str(e)
        if spec.num_trainers is not None and (problem := _replay_and_trainers(lane, f"policies.{name}.num_trainers")):
            return problem
    return None


def _action_noise(config: ExperimentConfig) -> str | None:
    """Colored action noise is drawn where actions are chosen and handed to the policy's rollout."""
    beta = getattr(config.algo_config, "action_noise_beta", 0)
    if not beta or config.policy == AUTO:  # auto: compat.check_combination refuses what does not fit
        return None
    rollout = getattr(registry.policies.get(config.policy), "rollout", None)
    if rollout is None or "noise" not in inspect.signature(rollout).parameters:
        return (f"field 'algo.action_noise_beta': {beta} needs a policy whose rollout takes `noise` (the unit "
                f"Gaussian draws to act with), as squashed-gaussian-mlp does; {config.policy!r} does not: set "
                "algo.action_noise_beta=0 or add it")
    return None


def _info_keys(config: ExperimentConfig) -> str | None:
    """monitor.info_keys become metric names info/<key> (srl.monitor.info)."""
    from srl.monitor.info import info_keys_problem

    return info_keys_problem(config.monitor.info_keys)


def _her(config: ExperimentConfig) -> str | None:
    """Hindsight relabelling (srl.data.her): an off-policy learner of 1-step single-row transitions
    from uniform replay, on a Gymnasium env (the goal env itself is checked where it is built)."""
    her = config.replay.her if config.replay is not None else None
    if her is None or config.replay is None:
        return None
    algo = registry.algorithms.get(config.algorithm).algorithm_cls
    fit = ", ".join(n for n in registry.algorithms.names() if _relabels(registry.algorithms.get(n).algorithm_cls))
    if not algo.needs_replay:
        return (f"field 'replay.her': hindsight relabelling needs an off-policy algorithm that learns from replay "
                f"({fit}); {config.algorithm!r} learns on-policy from its own segments")
    if not _relabels(algo):
        return (f"field 'replay.her': {config.algorithm!r} learns from sequences or whole teams, which hindsight "
                f"relabelling does not rewrite; algorithms it serves: {fit}")
    if config.replay.n_step != 1:
        return (f"field 'replay.n_step': {config.replay.n_step} with replay.her; relabelling recomputes one reward per "
                "transition: use replay.n_step=1")
    if config.replay.prioritized:
        return ("field 'replay.prioritized': true with replay.her; a priority is one goal's TD error and relabelling "
                "draws a new goal at each replay: use replay.prioritized=false")
    if config.env in registry.envs and config.env != "gymnasium":
        return (f"field 'replay.her': it needs a Gymnasium goal env (observation, achieved_goal, desired_goal and "
                f"compute_reward); env {config.env!r} is an srl env")
    return None


def _relabels(algo: type[Algorithm]) -> bool:
    return bool(algo.needs_replay and not algo.team_transitions and not algo.trains_recurrent
                and not getattr(algo, "needs_recurrent", False))


_CHECKS: tuple[Callable[[ExperimentConfig], str | None], ...] = (
    _names, _her, _env, _dataflow, _replay_and_trainers, _lock_step, _resume, _eval_target, _pod, _devices, _policies,
    _action_noise, _info_keys,
)
