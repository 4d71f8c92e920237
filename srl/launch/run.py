"""Run an experiment: build and check the graph, claim the run directory, then hand it to the
chosen launcher."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from srl import checkpoint
from srl.config import ConfigError, ExperimentConfig
from srl.faults import RunHalted
from srl.graph import Graph, build_graph
from srl.graph.machine import check_machine, raise_open_files_limit
from srl.graph.sizing import choice_lines
from srl.launch.lane_stats import LaneStats
from srl.launch.launches import start_launch
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs, RunStalled, WorkerFailed
from srl.launch.rundir import claim_run_dir
from srl.storage import WriteFailed
from srl.streams.tcp_setup import check_queues


def run_experiment(config: ExperimentConfig, started_s: float | None = None) -> int:
    """Train; return the process exit code (0 done, 1 a worker or a write failed, 130 interrupted)."""
    import torch

    torch.set_num_threads(1)  # before any torch op here: forked workers must not inherit thread pools
    graph = build_graph(config)  # every check that can fail does so before anything starts
    check_machine(graph)  # ... and what this machine cannot hold: CPUs, open files, shared memory, memory
    check_queues(graph)  # ... and the messages in flight that the queues' byte budget cannot hold
    raise_open_files_limit(graph)
    try:
        claim = claim_run_dir(config)  # this run's alone until it ends (srl.launch.rundir)
    except WriteFailed as e:  # a disk full at start, say: the directory is left as it was found
        return _not_started(e)
    outputs = None
    try:
        try:  # every write before the workers start; a failed one is one line, and nothing has started
            resumed_env_steps, resumed_version = _resume_point(graph, claim.launch)
            outputs = RunOutputs(config, time.time() if started_s is None else started_s, claim.launch)
            monitor = _monitor(graph, outputs, resumed_env_steps)
            # where this launch starts in the run: its counters go on from there (srl.launch.launches)
            outputs.launches = start_launch(outputs.run_dir, claim.launch, outputs.started_s, resumed_env_steps,
                                            resumed_version)
            monitor.continue_run(outputs.launches[-1])
        except WriteFailed as e:
            return _not_started(e)
        return _launch(graph, outputs, monitor)
    finally:
        claim.release(launched=outputs is not None)


def _not_started(error: WriteFailed) -> int:
    Console(stderr=True).print(f"srl: {error}", markup=False, highlight=False, soft_wrap=True)
    return 1


def _resume_point(graph: Graph, launch: int) -> tuple[int, int | None]:
    """run.resume=: the env steps and the version the run continues from (an ensemble's: its members'
    together; a run of several policies: the least of its training policies'; (0, None) for a new run).
    Each checkpoint is the newest of this run that loads into the configured policy and algorithm
    (each one passed over gets a line, and latest.json is pointed at the one chosen). Where a trainer (of a policy, of an ensemble member)
    has none, or none that loads, the launch is refused now, before anything starts: a ConfigError
    naming each such directory and what it looked for there. Unless run.if_no_checkpoint=start_fresh:
    then each of those trains from scratch, said on a line (its unusable files set aside first).
    Before this refusal, a resume whose checkpoints/ was gone trained from scratch without a word."""
    c = graph.config
    if c.run.resume is None:
        return 0, None
    states: dict[Path, dict | None] = {}
    missing: dict[Path, str] = {}  # run dir -> what was looked for there, or why none of its checkpoints loads
    unusable: set[Path] = set()  # those of `missing` whose files do not load
    for inner, run_dirs in _trainer_dirs(graph):
        apply = _loader(inner)
        for run_dir in run_dirs:
            try:
                states[run_dir] = checkpoint.load_latest(run_dir, c.run.run_id, apply=apply)
            except checkpoint.CheckpointError as e:
                states[run_dir], missing[run_dir] = None, str(e)
                unusable.add(run_dir)
            if states[run_dir] is None:
                missing.setdefault(run_dir, checkpoint.nothing_to_load(run_dir))
    if missing:
        _start_fresh_or_refuse(c, missing, unusable, launch)
    for run_dir, state in states.items():
        # the trainer (and a restart of it) goes straight to the checkpoint chosen here
        if state is not None and Path(state["path"]).name != (checkpoint.latest_meta(run_dir) or {}).get("path"):
            checkpoint.point_latest(run_dir, Path(state["path"]), state["version"], state["env_steps"], c.run.run_id)
    steps = [0 if state is None else state["env_steps"] for state in states.values()]  # 0: it starts fresh
    versions = [0 if state is None else state["version"] for state in states.values()]
    if c.pod.ensemble.population > 1:
        return sum(steps), sum(versions)
    return min(steps, default=0), min(versions, default=0)


def _trainer_dirs(graph: Graph) -> list[tuple[Graph, list[Path]]]:
    """(the graph of a trained policy, the run dirs its trainers keep checkpoints in): the run's own;
    each member's (srl.workers.member); each training policy's (srl.graph.lanes: run_dir/policies/<name>)."""
    c = graph.config
    if c.pod.ensemble.population > 1:
        from srl.population.ensemble import check_population
        from srl.workers.member import member_folder

        check_population(c)
        return [(graph, [member_folder(str(c.run.run_dir), k) for k in range(c.pod.ensemble.population)])]
    return [(lane.graph, [Path(str(lane.graph.config.run.run_dir))]) for lane in graph.lanes if lane.graph.trains]


def _start_fresh_or_refuse(config: ExperimentConfig, missing: dict[Path, str], unusable: set[Path], launch: int) -> None:
    """run.if_no_checkpoint: refuse (a ConfigError naming each of `missing` and what was looked for
    there; nothing touched), or start_fresh (a line for each, its `unusable` files set aside)."""
    if config.run.if_no_checkpoint == "refuse":
        aside = f" (moving the unusable files to checkpoints/unusable-launch{launch}/)" if unusable else ""
        raise ConfigError(f"field 'run.resume': {'; '.join(missing.values())}: nothing to continue from; "
                          f"run.if_no_checkpoint=start_fresh trains {'them' if len(missing) > 1 else 'it'} from "
                          f"scratch{aside}, or resume a run directory that has its checkpoints")
    for run_dir, why in missing.items():
        moved = f"; moved them to {checkpoint.set_aside(run_dir, launch)}" if run_dir in unusable else ""
        print(f"srl: run.if_no_checkpoint=start_fresh: {why}{moved}; training from scratch", file=sys.stderr,
              flush=True)


def _loader(graph: Graph) -> Callable[[dict], None]:
    """What loads a checkpoint into a policy and algorithm as `graph` configures them (raising where
    it does not fit); one for all members of an ensemble. The checkpoints are tried on the policy and
    algorithm that build_graph checked (Graph.checked_models), not on new ones."""
    policy, algorithm = graph.checked_models()

    def apply(state: dict) -> None:
        policy.load_state_dict(state["policy"])
        algorithm.load_state_dict(state["algorithm"])

    return apply


def _monitor(graph: Graph, outputs: RunOutputs, resumed_env_steps: int) -> RunMonitor:
    """The controller's view of the run, with an ensemble's tournament or a league's table, whose
    first files are written now (WriteFailed where they cannot be)."""
    config = graph.config
    monitor = RunMonitor(config, resumed_env_steps, launched_s=outputs.started_s,
                         lanes=[LaneStats.of(lane) for lane in graph.lanes])
    if config.pod.ensemble.population > 1:  # a tournament of pods: its manager is a part of the controller
        from srl.population.ensemble import PopulationManager

        monitor.observers.append(PopulationManager(config, outputs.started_s))
    leagues = [(name, spec.league) for name, spec in config.policies.items() if spec.league is not None]
    if leagues:  # a self-play league (one: srl.config.checks): its snapshots and table are kept here (srl.population.keeper)
        from srl.population.keeper import LeagueKeeper

        monitor.observers += [LeagueKeeper(config, name, spec, graph) for name, spec in leagues]
    return monitor


def _launch(graph: Graph, outputs: RunOutputs, monitor: RunMonitor) -> int:
    config = graph.config
    console = Console(stderr=True)
    # user text (names, paths, errors, install hints like 'srl[plot]') goes out with markup=False or
    # escaped: rich would take any "[...]" in it for a style tag and drop it
    console.print(f"[bold]srl[/] {escape(config.experiment)}: launch.launcher={config.launch.launcher} "
                  f"run.run_dir={escape(str(outputs.run_dir))}", soft_wrap=True)
    if graph.policy_choice.name:  # which policy acts and why (srl.graph.default_policy); of several: srl graph
        console.print(graph.policy_choice.line(), markup=False, highlight=False, soft_wrap=True)
    for line in choice_lines(config):  # the env backend and, with launch.layout=machine, the layout
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if config.launch.launcher == "inline":
        from srl.launch.inline import run_inline as launch
    elif config.launch.launcher == "ray":
        from srl.launch.ray_launcher import run_ray as launch
    else:
        from srl.launch.local import run_local as launch
    error, code = None, 0
    try:
        reason = launch(graph, outputs, monitor)
        monitor.finish()
        code = 130 if reason == "interrupted" else 0
    except RunStalled as stall:
        reason, error, code = "stalled", str(stall), 1
    except (WorkerFailed, RunHalted) as failure:  # RunHalted: raised in this process by an inline kernel (srl.faults)
        reason, error, code = "worker failed", str(failure), 1
    except WriteFailed as failure:  # a run file (metrics, events, checkpoint) could not be written
        reason, error, code = "write failed", str(failure), 1
    except KeyboardInterrupt:
        reason, code = "interrupted", 130
    summary = outputs.finish(monitor, reason, error)
    for fault in outputs.end_faults:  # the summary's own write, say: the fault that ended the run is `error`
        if fault != error:
            console.print(f"srl: {fault}", markup=False, highlight=False, soft_wrap=True)
    if monitor.time_breakdown.workers:
        console.print(monitor.time_breakdown.format(), highlight=False, markup=False, soft_wrap=True)
    # no drawing on a disk that failed a write already: its note would repeat the fault
    disk_ok = reason != "write failed" and not outputs.end_faults
    note = outputs.write_learning_curve() if disk_ok else None
    if note:
        console.print(note, markup=False, highlight=False, soft_wrap=True)  # one line: copyable
    for fault in outputs.close_trackers(code):  # the curve and summary go to W&B, MLflow... too
        if fault != error:
            console.print(f"srl: {fault}", markup=False, highlight=False, soft_wrap=True)
    if error:
        console.print(f"[bold red]run failed[/]: {escape(error)}", soft_wrap=True)
    skipped = summary["nonfinite_episodes_skipped"]  # (dataflow.nonfinite_env=skip_episode)
    console.print(
        f"stopped: {reason}; env_steps={summary['env_steps']} env_steps/s={summary['env_steps_per_s']} "
        f"return(last 100)={summary['episode_return_mean']} wall={summary['wall_time_s']} s"
        + (f" nonfinite_episodes_skipped={skipped}" if skipped else ""),
        markup=False, soft_wrap=True,
    )
    return code
