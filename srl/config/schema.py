"""The experiment config: typed, each field documented once, in one section per concern.

`srl.config.checks.build_config(values)` checks an experiment's values (the registered experiment's, or an experiment
file's, with `key=value` overrides: `srl.config.load.load_config`) field by field, then across fields
(srl.config.checks); every problem becomes one `ConfigError` that names the field and what is allowed,
before any process starts. Keys of the config before it had sections are read through `MOVED`
(srl.config.overrides, with the overrides and the messages of what does not fit).
"""

from __future__ import annotations

import importlib
import ipaddress
import os
import sys
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    field_validator,
    model_validator,
)

from srl.api.algorithm import AlgorithmConfig

RUN_ID_PREFIX_ENV = "SRL_RUN_ID_PREFIX"  # debug.run_id_prefix where none is given (DebugConfig)


class ConfigError(ValueError):
    """Invalid experiment config; the message names the field and the allowed values."""


def comma_list(value: Any) -> Any:
    """A list field given as one string on the command line (`a,b`): its items, blanks dropped."""
    return [item.strip() for item in value.split(",") if item.strip()] if isinstance(value, str) else value


class Settings(BaseModel):
    """A part of the config: an unknown key is an error, and so is a nan or inf (it means nothing here)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class RayResources(Settings):
    """What one worker of a role asks Ray for (launcher=ray)."""

    num_cpus: float = Field(1.0, ge=0, description="CPUs reserved for the worker.")
    num_gpus: float = Field(0.0, ge=0, description="GPUs reserved for the worker (fractions share one).")
    memory: int | None = Field(None, ge=0, description="Bytes of memory reserved for the worker.")
    resources: dict[str, float] = Field(
        default_factory=dict, description="Custom Ray resources, e.g. {node_a: 1} to pin the worker to a node."
    )


RAY_ROLES = ("actor", "policy", "trainer", "params", "pod")


GOAL_WRAPPER = "srl.envs.goals:GoalObservation"  # a goal env's Dict as one Box, for replay.her


class HerConfig(Settings):
    """Hindsight experience replay (srl.data.her) for goal envs: observations a Dict of observation,
    achieved_goal and desired_goal, and the env's compute_reward(achieved_goal, desired_goal, info)."""

    strategy: Literal["future", "final", "episode"] = Field(
        "future", description="Where a relabelled goal comes from: future = achieved at a later step of the same "
        "episode, final = at its last step, episode = at any of its steps."
    )
    k: int = Field(4, ge=1, description="Relabelled goals per original one: a k/(k+1) share of each batch gets a "
                   "new goal (SB3's n_sampled_goal).")


class ReplayConfig(Settings):
    """The buffer worker's replay memory (srl.workers.buffer); set `replay` to use one."""

    capacity: int = Field(100_000, ge=1, description="Transitions kept; the oldest are overwritten.")
    batch_size: int = Field(256, ge=1, description="Transitions in each batch served to the trainer.")
    prioritized: bool = Field(True, description="Prioritized replay (sum tree); false = uniform sampling.")
    alpha: float = Field(0.6, ge=0, description="Priority exponent: P(i) ~ (|TD_i| + priority_eps)^alpha.")
    beta: float = Field(0.4, ge=0, le=1, description="Importance-weight exponent: w_i ~ (N P(i))^-beta.")
    priority_eps: float = Field(1e-3, gt=0, description="Added to |TD error| so no transition has priority 0.")
    n_step: int = Field(3, ge=1, description="Steps summed in each return before bootstrapping.")
    gamma: float = Field(0.99, ge=0, le=1, description="Discount of the n-step returns (and of the bootstrap).")
    warmup: int = Field(1_000, ge=1, description="Transitions stored before the first batch is served.")
    replay_ratio: float | None = Field(
        None, gt=0, description="Transitions sampled per transition stored after warmup, held both ways (the "
        "trainer waits for actors, or actors for the trainer); None = batches as fast as the trainer takes them."
    )
    batch_slots: int = Field(2, ge=1, description="Batch slots in shared memory: the buffer fills one while "
                             "the trainer learns on another.")
    her: HerConfig | None = Field(
        None, description="Hindsight relabelling for goal envs, replay.her.*: {strategy: future, k: 4}; the env's Dict "
        "observation is flattened to [observation, achieved_goal, desired_goal] (srl.envs.goals:GoalObservation, "
        "added to env_wrappers). Needs 1-step uniform replay (n_step=1, prioritized=false); None = off."
    )

    @model_validator(mode="after")
    def _check_sizes(self) -> ReplayConfig:
        if self.batch_size > self.capacity or self.warmup > self.capacity:
            raise ValueError(
                f"batch_size ({self.batch_size}) and warmup ({self.warmup}) must not exceed capacity ({self.capacity})"
            )
        return self


class EnsembleConfig(Settings):
    """A tournament-based ensemble of pods (`pod.enabled=true`); see srl.population.tournament."""

    population: int = Field(
        1, ge=1, description="Pods trained at once (one process each with launch.launcher=local); 1 = a single pod."
    )
    eval_interval_updates: int = Field(10, ge=1, description="Updates between a member's evaluations.")
    eval_episodes: int = Field(
        32, ge=0, description="Greedy episodes per evaluation (one per eval env, same seed for all); 0 = score "
        "a member by the mean return of its last 100 training episodes instead (free: no extra env steps)."
    )
    leaderboard_size: int = Field(5, ge=1, description="Best evaluations kept, with their checkpoints, in leaderboard.json.")
    ready_evals: int = Field(
        2, ge=1, description="Evaluations a member gets after it (re)starts before it may be replaced."
    )
    lag_fraction: float = Field(
        0.25, gt=0, le=1, description="A member ranking in this bottom fraction of latest returns (at least the "
        "worst one) is lagging."
    )
    margin: float = Field(0.0, ge=0, description="... and only if it is more than this below the best member's return.")
    exploit_top: int = Field(1, ge=1, description="A replacement copies one of the top this-many leaderboard entries.")
    perturb: list[str] = Field(
        default_factory=lambda: ["lr"], description="Numeric `algo` hyperparameters a copy perturbs."
    )
    perturb_factors: list[float] = Field(
        default_factory=lambda: [0.8, 1.25], description="Each perturbed hyperparameter is multiplied by one of these."
    )


class EnvWrapper(Settings):
    """One `env_wrappers` entry: `path(env, **kwargs)` wraps each Gymnasium env (srl.envs.wrappers)."""

    path: str = Field(description="Import path of the wrapper: package.module.Name or package.module:Name.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments after the env.")


class ExtraWorker(Settings):
    """One `extra_workers` entry: `count` workers of a registered kind (srl.api.register_worker)."""

    kind: str = Field(description="A registered worker kind (srl.api.register_worker).")
    count: int = Field(1, ge=1, le=64, description="How many workers of this kind.")
    policy: str | None = Field(None, description="With several policies (policies): the one whose dataflow they "
                               "join, which must train: they tap its samples, read and write its streams only, and "
                               "get its directory (run_dir/policies/<name>) as theirs.")


class RunConfig(Settings):
    """Where a run writes, its seed, and whether it runs in lock step."""

    seed: int = Field(1, ge=0, le=2**32 - 1, description="Seed of envs, policy init and sampling; env i of actor a "
                      "gets its own. 0 to 2^32 - 1: what numpy's and EnvPool's seeding take.")
    run_dir: str | None = Field(None, description="Output directory; default runs/<experiment>-<timestamp> "
                                "(runs/<experiment>-<env>-<timestamp> where an override changed the env).")
    resume: str | None = Field(None, description="A run directory to continue from its latest checkpoint. A launch "
                               "that finds none that loads (checkpoints/ gone, every file damaged or of other sizes; "
                               "any policy's or ensemble member's) is refused before anything starts, naming what it "
                               "looked for, unless if_no_checkpoint=start_fresh.")
    if_no_checkpoint: Literal["refuse", "start_fresh"] = Field(
        "refuse", description="What run.resume= does where the run (a policy of it, a member of its ensemble) has no "
        "checkpoint that loads: refuse the launch, or start_fresh: train that one from scratch in the run's directory "
        "(its config, run id and metrics go on), its unusable files first moved to checkpoints/unusable-launch<N>/. "
        "For one launch: a later run.resume= does not inherit it."
    )
    run_id: str | None = Field(
        None, description="Set by srl at a run's first launch and kept by run.resume=; every checkpoint carries it "
        "and a trainer loads only its own run's (none: a new one)."
    )
    deterministic: bool = Field(
        False,
        description="Lock-step dataflow: same seed, same parameters, whatever the timing. Sets batch_segments to "
        "num_actor_workers * ring_splits (one segment per ring group per update) and keeps every segment. The "
        "trainer decides max_updates, total_env_steps (env steps it trained on) and target_return (episodes that "
        "ended in its segments) after an update, so every run stops after the same one; time_limit_s is refused. "
        "No worker is restarted: a failure ends the run (run.resume= continues it).",
    )
    checkpoint_interval_s: float = Field(60.0, gt=0, description="Seconds between checkpoints (and one at exit).")


class LaunchConfig(Settings):
    """Worker processes, where they run, their threads and what ends them."""

    launcher: Literal["inline", "local", "ray"] = Field(
        "local",
        description="inline: every worker in this process (debugging); local: one process per worker; "
        "ray: one Ray actor per worker (see ray_address, ray_resources).",
    )
    num_actor_workers: int = Field(1, ge=1, le=4096, description="Actor worker processes, each stepping a ring of "
                                   "envs (and at most 32 worker processes per CPU in all: srl.graph.machine). 4,096: about "
                                   "what one controller core reads the reports of (docs/scaling.md).")
    num_policy_workers: int = Field(
        1, ge=1, le=1024, description="Policy worker processes (dataflow.inference='policy_worker')."
    )
    layout: Literal["given", "machine"] = Field(
        "given", description="given: num_actor_workers, dataflow.envs_per_actor and actor_niceness as set (or their "
        "defaults); machine: the ones the config leaves unset derived from this machine's cores, its GPU and the "
        "env's backend (srl.graph.sizing: fewer, bigger actors of 32 envs for EnvPool, one actor of 16 envs per core "
        "for a Python env, cores left for the trainer, policy worker and controller). The run prints the layout."
    )
    actor_niceness: int = Field(
        0, ge=0, le=19, description="OS niceness added to each actor process (os.nice): higher yields the CPU to the "
        "policy worker and trainer that the actors wait on. layout=machine sets 5 on machines of 8 cores or more."
    )
    num_trainers: int = Field(
        1, ge=1, le=256, description="Trainer workers of the one policy, a torch.distributed group (gloo on CPU, NCCL on "
        "CUDA): actor a feeds trainer a mod N, gradients are averaged before every optimizer step, and only "
        "trainer 0 publishes parameters and writes checkpoints. num_actor_workers must be a multiple of it.",
    )
    torch_threads: int = Field(
        1, ge=1, le=1024, description="torch intra-op threads per worker process (at most 4 per CPU: srl.graph.machine)."
    )
    trainer_torch_threads: int | None = Field(
        None, ge=1, le=1024, description="torch intra-op threads of processes that train (trainers, pods, an inline "
        "run); unset: torch_threads. A CNN update is the heaviest work of a run: give it the spare cores."
    )
    heartbeat_timeout_s: float = Field(
        30.0, ge=1.0, description="A silent worker is declared dead after this (>= 1 s: workers report every 0.5 s)."
    )
    stall_timeout_s: float | None = Field(
        300.0, gt=0, description="run.deterministic=true: a run whose env steps and updates have not moved for this "
        "long while every worker reports ends as stalled, naming each worker's last version: a lock-step wait that "
        "nothing will answer (a defect: none is known). None: never."
    )
    worker_memory_limit_mib: int | None = Field(
        None, ge=1, description="launch.launcher=local: a worker process whose own memory (RSS less shared pages) grows "
        "past this many MiB ends the run as a failed worker (the others stop cleanly, the summary names it). "
        "None: only a warning line, at half of the machine's memory."
    )
    max_restarts: int = Field(
        3, ge=0, description="Restarts of one worker allowed within restart_window_s; one more failure ends "
        "the run with its traceback (0: any failure ends the run). Trainers resume from their checkpoint. "
        "A run.deterministic=true run restarts none."
    )
    restart_window_s: float = Field(
        60.0, gt=0, description="Seconds over which max_restarts is counted (a crash loop ends the run)."
    )
    max_nonfinite_updates: int = Field(
        10, ge=0, description="Updates in a row that may be undone (no new version, but in lock step the unchanged weights "
        "as one; counted in nonfinite_updates_skipped) for leaving a NaN or an infinity in the policy or the algorithm's state, "
        "as a non-finite loss or gradient does; one more ends the run (0: the first one does)."
    )
    ray_address: str | None = Field(
        None, description="launch.launcher=ray: address of a running Ray cluster (ray://host:10001, auto); "
        "none: start a local Ray instance for the run."
    )
    ray_resources: dict[str, RayResources] = Field(
        default_factory=dict,
        description="launch.launcher=ray: resources per worker role (actor, policy, trainer, params, pod); "
        "a role not listed asks for 1 CPU (params: none, it only forwards weights).",
    )
    ray_placement_timeout_s: float = Field(
        30.0, gt=0, description="launch.launcher=ray: a worker whose resources Ray still cannot grant after this long "
        "(other workers hold them) ends the run, naming the worker, its request and the cluster's total and free "
        "resources. A request no node could ever hold is refused before any worker starts. Raise it for a "
        "cluster that autoscales (new nodes take minutes).",
    )

    @field_validator("ray_resources")
    @classmethod
    def _known_roles(cls, value: dict[str, RayResources]) -> dict[str, RayResources]:
        unknown = sorted(set(value) - set(RAY_ROLES))
        if unknown:
            raise ValueError(f"unknown roles {unknown}; roles are {', '.join(RAY_ROLES)}")
        return value


class DataflowConfig(Settings):
    """How env steps become segments and reach the trainer."""

    envs_per_actor: int = Field(16, ge=1, le=65536, description="Environments in each actor's ring.")
    ring_splits: int = Field(
        1, ge=1, le=256, description="Groups the ring is split into: while one group waits for actions, the others "
        "step. Default: 1 with dataflow.inference=inline (nothing to wait for), 2 with dataflow.inference=policy_worker."
    )
    inference: Literal["policy_worker", "inline"] = Field(
        "inline", description="inline: in each actor, no round trip (a small network on a CPU); policy_worker: "
        "batched across actors in policy workers (a GPU, a large network)."
    )
    sample_length: int = Field(
        32, ge=1, le=100_000, description="Env steps per trajectory segment sent to the trainer (T)."
    )
    segment_slots: int = Field(
        2, ge=1, le=64, description="Segment buffers per ring group; more let actors run ahead of the trainer (more "
        "lag; past a few, only lag). All slots must fit in free shared memory (/dev/shm), checked before launch."
    )
    batch_segments: int = Field(
        1, ge=1, le=65536, description="Segments each trainer gathers for one update (with launch.num_trainers=N, N times as many "
        "make one synchronized update)."
    )
    max_policy_lag: int = Field(
        2, ge=0, description="Drop segments acted more than this many versions before the trainer's current one."
    )
    nonfinite_env: Literal["error", "skip_episode"] = Field(
        "error", description="When an env returns a NaN or an infinity (observation or reward). error: end the run "
        "naming the env, env index and field; skip_episode: record that step with the bad values zeroed and cut "
        "as truncated, restart the env, and count the episode in nonfinite_episodes_skipped, not in the returns "
        "(actors only: not with pod.enabled=true)."
    )
    max_skipped_fraction: float = Field(
        0.5, gt=0, le=1, description="nonfinite_env=skip_episode: the run ends, naming the env, once more than this "
        "fraction of the last 100 episodes an actor ended (finished or skipped) were skipped, as an env that keeps "
        "returning NaN or inf makes them; 1 = never (every skip still counts in nonfinite_episodes_skipped)."
    )
    transport: Literal["shm", "tcp"] = Field(
        "shm",
        description="Stream backend of launch.launcher=local or ray. shm: shared memory + ZeroMQ ipc (one machine); tcp: "
        "ZeroMQ tcp with HMAC-signed raw frames, slot arrays sent with each message (workers on any machine; "
        "with launch.launcher=ray each stream listens on its owner's node, found through Ray).",
    )
    bind_host: str = Field(
        "127.0.0.1", description="IP address that tcp stream listeners bind: one of this machine's, checked before "
        "launch (0.0.0.0: every interface, said in a warning line). With launch.launcher=ray each worker binds its "
        "own node's IP instead, unless this is a wildcard (0.0.0.0, ::)."
    )
    param_relay: Literal["auto", "off", "per_host"] = Field(
        "auto", description="Parameter relays: one worker per host that subscribes once to the parameter service "
        "and serves that host's subscribers (actors with inline inference, else policy workers), so the service "
        "sends each version once per host, not once per subscriber. auto: with launch.launcher=ray and "
        "dataflow.transport=tcp, on each host but the service's that runs 2 or more subscribers, when the run "
        "spans more than one host; per_host: on every host with subscribers (locally: one relay for all); off: "
        "none (docs/scaling.md, Parameter fan-out)."
    )
    max_queued_bytes_per_peer: int = Field(
        64 << 20, ge=16 << 20, le=1 << 40, description="Bytes one peer of a stream may make a process hold in "
        "queues (per connection, launch.launcher=local or ray): each socket queues this over its stream's largest message, "
        "at least one. At the bound a send waits up to 1 s, then drops the message; a publisher drops a slow "
        "subscriber's; parameters keep only the newest; every drop counts in dropped_messages. The messages that "
        "the slots put in flight (segments, inference, batches) must fit: checked before launch (docs/security.md)."
    )

    @model_validator(mode="before")
    @classmethod
    def _ring_splits_for_inference(cls, data: Any) -> Any:
        """ring_splits unset: 2 groups where actions come from a policy worker (one steps while the
        other waits), 1 inline."""
        if isinstance(data, dict) and data.get("ring_splits") is None:
            data = {**data, "ring_splits": 2 if data.get("inference") == "policy_worker" else 1}
        return data

    @field_validator("bind_host")
    @classmethod
    def _check_bind_host(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(f"bind_host must be an IP address (127.0.0.1, 0.0.0.0, ::1), got {value!r}") from None
        return value

    @property
    def envs_per_split(self) -> int:
        return self.envs_per_actor // self.ring_splits


class StopConfig(Settings):
    """When a run stops: the first rule reached."""

    max_updates: int | None = Field(None, ge=1, le=2**53, description="Stop after this many trainer updates.")
    total_env_steps: int = Field(
        1_000_000, ge=1, le=2**53, description="Stop after this many env steps (all actors)."
    )
    target_return: float | None = Field(
        None, description="Stop once the mean return named by target_on reaches this."
    )
    target_on: Literal["training", "eval"] = Field(
        "training", description="What target_return is held against. training: the mean return of the last 100 "
        "training episodes (exploring); eval: the evaluator's last round, eval.episodes deterministic episodes with "
        "the newest weights (how rl-baselines3-zoo scores its agents; needs eval.episodes > 0)."
    )
    time_limit_s: float | None = Field(
        None, gt=0, description="Stop after this many seconds of training (not with run.deterministic=true); "
        "time_limit_counts says whose seconds."
    )
    time_limit_counts: Literal["run", "launch", "stepping"] = Field(
        "run", description="The seconds time_limit_s is held against. run: the run's, all its launches together "
        "(a run.resume= launch gets what is left; the time between launches is not counted); launch: this launch's, "
        "from its workers' start; stepping: this launch's from its first env steps (env construction and start-up "
        "not counted: srl bench sampling)."
    )


class MonitorConfig(Settings):
    """Metric reports, the progress display and the trackers."""

    log_interval_s: float = Field(1.0, gt=0, le=2.0, description="Seconds between metric reports (<= 2).")
    display: Literal["auto", "on", "off", "plain"] = Field(
        "auto", description="Progress while a run goes. auto/on: a live table on a terminal, and off a terminal "
        "(stdout a file or a pipe: nohup, CI) one plain line every progress_interval_s; plain: the lines even on "
        "a terminal; off: neither. Both show progress toward the nearest stop rule with an ETA."
    )
    progress_interval_s: float = Field(
        15.0, gt=0, le=3600, description="Seconds between the plain progress lines (display off a terminal, or "
        "plain); one line at most per metric report (log_interval_s)."
    )
    tracker: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(
        ["tensorboard"], description="Where metrics, the config and the learning curve go "
        "besides metrics.jsonl: tensorboard (run_dir/tb), wandb ([wandb] extra; WANDB_MODE=offline works without "
        "network), mlflow ([mlflow] extra); a list for several ([tensorboard,wandb]), [] for none."
    )
    wandb_project: str | None = Field(None, description="monitor.tracker=wandb: the W&B project; none: WANDB_PROJECT, else srl.")
    mlflow_tracking_uri: str | None = Field(
        None, description="monitor.tracker=mlflow: the tracking URI (http://host:5000, sqlite:///mlflow.db, file:...); "
        "none: MLFLOW_TRACKING_URI, else MLflow's default."
    )
    info_keys: list[str] = Field(
        ["is_success", "success"], description="Keys of the env's step `info` logged as metrics: each one's value "
        "at an episode's last step, averaged over the last 100 episodes that had it, as info/<key> (metrics.jsonl, "
        "the trackers, summary.json's `info`, the progress line). By default the success rate of goal envs: "
        "is_success (Fetch, gymnasium-robotics) and success (PointMaze), each logged only where the env reports it; "
        "[] for none; at most 16. Envs of the loop backend and srl Environments report info (docs/config.md)."
    )
    learning_curve: bool = Field(
        True, description="Write learning_curve.png (return vs env steps and vs time) in the run dir at the end "
        "(needs matplotlib, the [plot] extra; skipped with a note without it)."
    )

    @field_validator("info_keys", mode="before")
    @classmethod
    def _split_info_keys(cls, value: Any) -> Any:
        """`monitor.info_keys=is_success,crashed` on the command line: two keys."""
        return comma_list(value)

    @field_validator("tracker", mode="before")
    @classmethod
    def _split_trackers(cls, value: Any) -> Any:
        if value is None or value == "none":
            return []
        return comma_list(value)

    @field_validator("tracker")
    @classmethod
    def _trackers_installed(cls, value: list[str]) -> list[str]:
        from srl.monitor.trackers import missing_package

        value = list(dict.fromkeys(value))  # each once
        for name in value:
            if (why := missing_package(name)) is not None:
                raise ValueError(why)
        return value


class EvalConfig(Settings):
    """The evaluator worker (dataflow runs only)."""

    episodes: int = Field(
        0, ge=0, description="Deterministic evaluation episodes per round, played by an evaluator worker on its own "
        "env with the newest parameters (eval/episode_return_mean); 0 = no evaluator."
    )
    interval_s: float = Field(10.0, gt=0, description="Seconds between the end of one evaluation round and the next.")


class DeviceConfig(Settings):
    """Torch device of each role's networks (srl.devices): auto | cpu | cuda | cuda:N; what each
    resolved to is in summary.json."""

    trainer: str = Field("auto", description="Trainers (and their optimizers): auto = CUDA where torch sees a "
                         "device, else the CPU. Trainers of a group take one GPU each (trainer i: GPU i mod count).")
    policy: str = Field("auto", description="Policy workers (dataflow.inference=policy_worker): one batch per "
                        "request wave goes to the device and back.")
    policy_graphs: Literal["auto", "on", "off"] = Field(
        "auto", description="Acting on CUDA replays its forward pass as CUDA graphs, one per batch size "
        "(srl.workers.cuda_acting): auto = for policies that declare graph_safe (MLP, CNN), on = for any "
        "non-recurrent policy, off = eager. Never on the CPU, with action noise or run.deterministic.")
    actor: str = Field("cpu", description="Inline inference in each actor (dataflow.inference=inline): cpu, since "
                       "every actor process would hold a CUDA context of its own; a GPU suits policy workers instead.")
    eval: str = Field("cpu", description="The evaluator's policy (eval.episodes > 0).")


class DebugConfig(Settings):
    """What tests set to see inside a run: records and perturbations that no run needs."""

    # Read where they act (the worker shell, the trainer's build, the launcher) from the run's
    # config, which every worker is given: forked processes and Ray actors alike, which inherited
    # environment variables did not reach.

    record_param_digests: bool = Field(
        False, description="Each trainer writes the sha256 of its parameters after every update to "
        "run_dir/param_digests/trainer-<t>.json (tests check that every trainer of a group took the same steps).")
    record_streams: bool = Field(
        False, description="Each process writes the streams it opened to run_dir/streams/<worker>.json, to be "
        "compared with those the graph declares (tests/test_declared_streams.py).")
    jitter_max_s: float = Field(
        0.0, ge=0, le=1.0, description="Each worker pauses a random 0 to this many seconds (unseeded) before every "
        "poll: deterministic mode's tests perturb every worker's timing with it; 0 = no pauses.")
    run_id_prefix: str = Field(
        "", max_length=16, pattern=r"^[A-Za-z0-9]*$", validate_default=True,
        description="Letters and digits before the run's random id (its shared memory blocks and sockets are "
        f"named by it); empty: ${RUN_ID_PREFIX_ENV} where set. A test session sets that variable so its leak "
        "check tells the blocks of its runs, in-process or `srl run` ones, from other runs on the machine.")

    @field_validator("run_id_prefix", mode="before")
    @classmethod
    def _session_prefix(cls, value: Any) -> Any:
        """The one setting a test session cannot give each run it starts as an override (a run's
        config is built in the `srl run` process, or by the test itself): its environment's."""
        return value or os.environ.get(RUN_ID_PREFIX_ENV, "")


class PodConfig(Settings):
    """A pod: one process steps a batched env and trains (`pod.enabled=true`)."""

    enabled: bool = Field(
        False,
        description="One pod process steps a batched env (envs_per_actor of them) and trains on `device`; "
        "no actors, policy workers or streams. Needs a batched env (batched-cartpole, ...).",
    )
    device: str = Field("cpu", description="Torch device of a pod (auto, cpu, cuda, cuda:N; srl.devices); an "
                        "ensemble's members take one GPU each with cuda.")
    cuda_graphs: Literal["auto", "on", "off"] = Field(
        "auto", description="Capture a pod's rollout and update as CUDA graphs (srl.workers.pod): auto = where its "
        "device is CUDA; off = eager (as on the CPU), to compare. Ensemble members run eager.")
    ensemble: EnsembleConfig = Field(
        default_factory=EnsembleConfig,
        description="Tournament-based ensemble of pods (pod=true): pod.ensemble.population=K trains K at once.",
    )


class LeagueSpec(Settings):
    """A policy that plays a self-play league: snapshots of another policy (srl.population.league)."""

    of: str = Field(description="The policy whose snapshots it plays (one that trains).")
    snapshot_interval_updates: int = Field(20, ge=1, description="That policy's updates between snapshots "
                                           "(each its newest checkpoint: run.checkpoint_interval_s sets how fresh).")
    pool_size: int = Field(10, ge=1, le=1000, description="The newest snapshots it draws from (and the scripted "
                           "ones).")
    choose: Literal["uniform", "latest", "weighted"] = Field(
        "weighted", description="Per episode: any pooled snapshot alike, the newest, or weighted toward "
        "the snapshots the learner loses to.")
    scripted: list[str] = Field(
        default_factory=list, description="Registered scripted policies (e.g. random-legal, connect4-lookahead) "
        "that stay in the pool beside the snapshots, drawn and rated like them: a fixed bar the learner keeps "
        "clearing while its own snapshots move.")
    refresh_s: float = Field(5.0, gt=0, description="Seconds between the controller's sends of the league's table "
                             "(league.json) to the league-pool's workers: the records that steer their draws (a new "
                             "snapshot is sent at once), and what a worker that joined late learns the pool from.")


class PolicySpec(Settings):
    """One policy of a run with several (`policies`): what acts for the agents mapped to it, and how
    it learns. A field left out is the run's own (the top-level policy, algorithm, algo, ...)."""

    policy: str | None = Field(None, description="A registered policy name; none: the run's `policy`.")
    policy_kwargs: dict[str, Any] | None = Field(None, description="Keyword arguments of the policy; none: the run's "
                                                 "where the policy is the run's, else none.")
    algorithm: str | None = Field(None, description="A registered algorithm name; none: the run's `algorithm`.")
    algo: dict[str, Any] = Field(
        default_factory=dict, description="Hyperparameters over the run's `algo` (over the algorithm's defaults "
        "where `algorithm` differs from the run's)."
    )
    trainable: bool = Field(True, description="false: it only acts (no trainer, no parameter service), with the "
                            "weights of `checkpoint`, or as a scripted policy (random, random-legal, ...).")
    checkpoint: str | None = Field(None, description="trainable=false: a checkpoint file (.pt of any srl run of this "
                                   "policy class and spaces) whose weights it acts with.")
    league: LeagueSpec | None = Field(None, description="It plays snapshots of another policy (a self-play league, "
                                      "league.json; srl leaderboard RUN_DIR); it does not train.")
    num_trainers: int | None = Field(None, ge=1, le=64, description="Its trainers; none: launch.num_trainers.")
    num_policy_workers: int | None = Field(
        None, ge=1, le=256, description="Its policy workers (dataflow.inference=policy_worker); none: "
        "launch.num_policy_workers."
    )

    @property
    def trains(self) -> bool:
        return self.trainable and self.league is None


class ExperimentConfig(Settings):
    """What is trained (env, policy, algorithm) at the top; how, in one section per concern."""

    experiment: str = Field("", description="Name of the experiment (shown in process titles and run dirs); "
                            "srl run sets it to the experiment's or the file's name.")
    modules: list[str] = Field(
        default_factory=list, description="Python modules to import first (they register envs, algorithms...), "
        "in the controller and every worker; looked for on the Python path, then in the current directory; a,b = two; "
        "module:function also calls function() once (a package that registers its ids on a call: "
        "minatar.gym:register_envs)."
    )
    env: str = Field("CartPole-v1", description="A registered srl env name or any Gymnasium id.")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the env factory.")
    env_wrappers: list[EnvWrapper] = Field(
        default_factory=list, description="Gymnasium wrappers around every env srl builds (actors, evaluation, "
        "srl eval), the first innermost; each an import path, or {path: ..., kwargs: {...}} for path(env, "
        "**kwargs): [minigrid.wrappers.ImgObsWrapper]. Gymnasium envs only, stepped by the loop backend."
    )
    env_backend: Literal["auto", "loop", "vector", "envpool"] = Field(
        "auto",
        description="How an actor steps a ring group. loop: one env after another; vector: the Gymnasium id's "
        "vector entry point, all in one call (CartPole-v1); envpool: EnvPool, all in one call ([envpool] extra); "
        "auto: vector for CartPole-v1 with no env_kwargs, envpool for an Atari id where EnvPool is installed and "
        "each env_kwarg has an EnvPool twin (frame_stack, repeat_action_probability, noop_max, frame_skip, "
        "screen_size...), else loop; the run prints its choice. Same-step auto-reset in every case.",
    )
    policy: str = Field("auto", description="A registered policy name, or auto: chosen by the observation and the "
                        "algorithm (ppo, appo, impala: actor-critic-cnn for an image, multi-input for a Dict, Tuple "
                        "or small image, actor-critic-mlp for a vector; docs/spaces.md), and written as the policy "
                        "chosen in the run's config.yaml. actor-critic-mlp reads one Box: for any other observation "
                        "multi-input acts in its place.")
    policy_kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the policy.")
    algorithm: str = Field("ppo", description="A registered algorithm name; its hyperparameters go in `algo`.")
    algo: SerializeAsAny[AlgorithmConfig] | dict[str, Any] = Field(
        default_factory=dict, description="Hyperparameters of `algorithm` (its own typed config)."
    )
    policies: dict[str, PolicySpec] = Field(
        default_factory=dict, description="Several policies in one run, by name, each with its own trainers, "
        "parameters and checkpoints (policy_mapping says which agents each acts for); none: one policy for all."
    )
    policy_mapping: dict[str, str] = Field(
        default_factory=dict, description="Agent name or pattern (fnmatch: adversary_*) -> policy name; an "
        "agent takes the first entry that matches it. Needed with `policies`."
    )
    replay: ReplayConfig | None = Field(
        None, description="A buffer worker between actors and trainer, with this replay memory "
        "(replay algorithms: dqn); None = segments go straight to the trainer (on-policy)."
    )
    extra_workers: list[ExtraWorker] = Field(
        default_factory=list, description="Workers of your own kinds beside the built-in ones, each with the "
        "streams its kind declares (docs/custom.md): [{kind: reward-stats, count: 1}]; with several policies each "
        "entry joins the dataflow of the one it names: [{kind: reward-stats, policy: prey}]."
    )
    run: RunConfig = Field(default_factory=RunConfig, description=RunConfig.__doc__)
    launch: LaunchConfig = Field(default_factory=LaunchConfig, description=LaunchConfig.__doc__)
    dataflow: DataflowConfig = Field(default_factory=DataflowConfig, description=DataflowConfig.__doc__)
    stop: StopConfig = Field(default_factory=StopConfig, description=StopConfig.__doc__)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig, description=MonitorConfig.__doc__)
    eval: EvalConfig = Field(default_factory=EvalConfig, description=EvalConfig.__doc__)
    pod: PodConfig = Field(default_factory=PodConfig, description=PodConfig.__doc__)
    devices: DeviceConfig = Field(default_factory=DeviceConfig, description=DeviceConfig.__doc__)
    debug: DebugConfig = Field(default_factory=DebugConfig, description=DebugConfig.__doc__)

    @field_validator("modules", mode="before")
    @classmethod
    def _split_modules(cls, value: Any) -> Any:
        return comma_list(value)

    @field_validator("env_wrappers", mode="before")
    @classmethod
    def _bare_wrapper_paths(cls, value: Any) -> Any:
        """A bare string entry is a path with no kwargs."""
        if isinstance(value, list):
            return [{"path": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _flatten_goals(self) -> ExperimentConfig:
        """replay.her relabels goals in flat observations: the goal env's Dict is flattened last."""
        if self.replay is not None and self.replay.her is not None and GOAL_WRAPPER not in [w.path for w in self.env_wrappers]:
            self.env_wrappers = [*self.env_wrappers, EnvWrapper(path=GOAL_WRAPPER)]
        return self

    def threads_for(self, trains: bool) -> int:
        """torch threads of one process: one that trains may get more than the others."""
        if trains and self.launch.trainer_torch_threads is not None:
            return self.launch.trainer_torch_threads
        return self.launch.torch_threads

    @property
    def algo_config(self) -> AlgorithmConfig:
        assert isinstance(self.algo, AlgorithmConfig), "load_config types `algo`"
        return self.algo

    def dump_yaml(self, path: Path) -> None:
        from srl.storage import write_text_atomic  # tmp + fsync + rename: never a torn config.yaml

        write_text_atomic(path, yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False))


def lock_step_batch_segments(launch: LaunchConfig, flow: DataflowConfig) -> int:
    """run.deterministic: a trainer's update is one segment from each ring group of its share of the actors."""
    return launch.num_actor_workers * flow.ring_splits // launch.num_trainers


def show_config(config: ExperimentConfig, changed_only: bool = False) -> str:
    """The config as YAML, as a run writes it to config.yaml (every value, defaults included); with
    `changed_only`, only the values that differ from the fields' defaults (the algorithm's
    settings against its own config's)."""
    values = config.model_dump(mode="json")
    if changed_only:
        defaults = ExperimentConfig(experiment=config.experiment).model_dump(mode="json")
        defaults["algo"] = type(config.algo_config)().model_dump(mode="json")
        values["run"].pop("run_dir")
        values = _changed(values, defaults)
    return yaml.safe_dump(values, sort_keys=False)


def _changed(values: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The values unlike their defaults, section by section."""
    out = {}
    for key, value in values.items():
        default = defaults.get(key)
        if isinstance(value, dict) and isinstance(default, dict) and default:
            value = _changed(value, default)
            if value:
                out[key] = value
        elif value != default:
            out[key] = value
    return out


def import_modules(names: list[str] | str) -> None:
    """Import user modules that register their envs, policies, algorithms, experiments.

    A module is looked for on sys.path, then in the current directory: `python -m srl.cli` has the
    current directory on sys.path, but the `srl` console script has its own bin directory there
    instead. The current directory goes last so that a stray file there cannot shadow a package."""
    for entry in module_entries(names):
        name, _, call = entry.partition(":")
        with_cwd_on_path()
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is None or not (name == e.name or name.startswith(e.name + ".")):
                raise  # the module is there, and something it imports is not: its traceback says where
            raise ConfigError(f"field 'modules': {_not_found(name, e.name)}") from None
        if call:
            _call_once(entry, module, call)


def module_entries(names: list[str] | str) -> list[str]:
    """The entries of a `modules` value: a list, or a string of comma-separated ones (a,b = two)."""
    parts = [p.strip() for n in ([names] if isinstance(names, str) else names) for p in str(n).split(",")]
    return [p for p in parts if p]


_CALLED: set[str] = set()  # `module:function` entries already called in this process


def _call_once(entry: str, module: Any, function: str) -> None:
    """`modules=minatar.gym:register_envs`: call `function()` of the module once per process, for a
    package that registers its env ids only when asked (a second call would re-register them)."""
    if entry in _CALLED:
        return
    target = getattr(module, function, None)
    if not callable(target):
        names = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise ConfigError(f"field 'modules': {entry!r}: module {module.__name__!r} has no function {function!r} "
                          f"(its functions: {', '.join(names[:20]) or 'none'})")
    target()
    _CALLED.add(entry)


def with_cwd_on_path() -> None:
    cwd = os.getcwd()
    if all(os.path.abspath(p or ".") != cwd for p in sys.path):
        sys.path.append(cwd)


def _not_found(name: str, missing: str) -> str:
    of = "" if missing == name else f" (needed by {name!r})"
    if "." in missing:  # the package is there, its submodule is not
        looked = getattr(importlib.import_module(missing.rpartition(".")[0]), "__path__", [])
    else:
        looked = [p for p in sys.path if p and os.path.isdir(p)]  # the current directory is last
    return f"no module named {missing!r}{of}; looked in {', '.join(looked)}"
