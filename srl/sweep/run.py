"""`srl sweep EXPERIMENT sweep.yaml`: ask Optuna for trials, run up to `parallel` of them at once,
report each one's mean return at env-step checkpoints so the pruner can stop it, score it from
its summary.json, and leave the results table and best.yaml in the sweep directory."""

from __future__ import annotations

import fcntl
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srl.config import ConfigError, ExperimentConfig
from srl.launch.signals import interrupt_on_sigterm
from srl.sweep import results
from srl.sweep.spec import SweepSpec, check_against_config, config_value, load_sweep_file, override_text
from srl.sweep.study import as_params, counted, fail_interrupted, intermediate, open_study, suggest
from srl.sweep.trial import LOG_FILE, TrialProcess

POLL_S = 0.25
LOCK_FILE = "sweep.lock"
KEPT_SUMMARY = ("stop_reason", "env_steps", "episode_return_mean", "time_to_target_s", "wall_time_s", "env_steps_per_s")


@dataclass
class Plan:
    """What every trial shares, settled before the first starts."""

    spec: SweepSpec
    experiment: str
    extra: list[str]  # overrides from the command line, after the file's
    sweep_dir: Path
    parallel: int
    report_every_env_steps: int
    unreached_s: float
    baseline: dict[str, Any]  # the experiment's own values of the space's keys
    config: ExperimentConfig  # the experiment's, with the file's and the command line's overrides
    ray_address: str | None = None  # launcher=ray: the cluster every trial joins (srl.sweep.cluster)


@dataclass
class Running:
    trial: Any  # optuna.Trial
    process: TrialProcess
    values: dict[str, Any]
    reported_step: int = 0  # the last env-step checkpoint reported to the pruner
    pruned: bool = False


def default_sweep_dir(experiment: str, sweep_file: str) -> Path:
    """sweeps/<experiment>-<sweep file>: the same command finds the same study again."""
    name = f"{Path(experiment).stem if experiment.endswith(('.yaml', '.yml')) else experiment}-{Path(sweep_file).stem}"
    return Path("sweeps") / re.sub(r"[^A-Za-z0-9._-]+", "-", name)


def default_parallel(config: ExperimentConfig, trials: int) -> int:
    """As many trials as this machine's CPUs hold, one CPU per worker process of a trial (one for
    an inline run); on ray, the cluster decides (srl.sweep.cluster)."""
    from srl.devices import cpu_count
    from srl.graph import build_graph

    if config.launch.launcher == "ray":
        return 1
    per_trial = 1 if config.launch.launcher == "inline" else max(1, len(build_graph(config).workers))
    return max(1, min(trials, cpu_count() // per_trial))


def plan_sweep(experiment: str, sweep_file: str, sweep_dir: str | None, extra: list[str]) -> Plan:
    """Every check that can fail, before any trial starts (ConfigError naming the field)."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ConfigError("srl sweep needs Optuna: pip install 'srl[sweep]'") from None
    spec = load_sweep_file(Path(sweep_file))
    config = check_against_config(spec, experiment, extra)
    if spec.objective == "time_to_target_s" and config.stop.target_return is None:
        raise ConfigError(f"{sweep_file}: objective time_to_target_s needs target_return (in overrides, "
                          f"e.g. stop.target_return=475); {experiment} has none")
    unreached = spec.unreached_s if spec.unreached_s is not None else (config.stop.time_limit_s or math.inf)
    every = spec.report_every_env_steps or max(1, config.stop.total_env_steps // 20)
    return Plan(spec, experiment, list(extra), Path(sweep_dir) if sweep_dir else default_sweep_dir(experiment, sweep_file),
                spec.parallel or default_parallel(config, spec.trials), every, unreached,
                {key: config_value(config, key) for key in spec.space}, config)


def run_sweep(experiment: str, sweep_file: str, sweep_dir: str | None = None, extra: list[str] | None = None) -> int:
    """Run the sweep to its `trials`; 0 when done, 130 on Ctrl-C (running trials stopped, kept for
    a retry when the same command runs again)."""
    plan = plan_sweep(experiment, sweep_file, sweep_dir, list(extra or []))
    plan.sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock(plan.sweep_dir)
    restore = interrupt_on_sigterm()  # `kill`, a scheduler: stop as Ctrl-C does
    sigint = signal.getsignal(signal.SIGINT)
    try:
        study = open_study(plan.sweep_dir, plan.spec, experiment, plan.extra)
        if plan.spec.baseline and not study.trials:
            study.enqueue_trial(as_params(plan.spec, plan.baseline), user_attrs={"baseline": True})
        done = counted(study)
        with _cluster(plan) as where:
            print(f"srl sweep {experiment}: {plan.sweep_dir} ({done} of {plan.spec.trials} trials done, "
                  f"{plan.parallel} at once{where})", flush=True)
            code = _schedule(plan, study)
        _write_results(plan, study)
        return code
    finally:
        restore()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, sigint)
        os.close(lock)


@contextmanager
def _cluster(plan: Plan) -> Iterator[str]:
    """With launch.launcher=ray, the trials' cluster (srl.sweep.cluster) while the trials run; yields
    where they run, for the first line."""
    if plan.config.launch.launcher != "ray":
        yield ""
        return
    from srl.sweep.cluster import trial_cluster

    with trial_cluster(plan.config, plan.spec.parallel, plan.spec.trials) as cluster:
        plan.ray_address, plan.parallel = cluster.address, cluster.parallel
        yield f", on the Ray cluster at {cluster.address}"


def _lock(sweep_dir: Path) -> int:
    fd = os.open(sweep_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise ConfigError(f"sweep directory {str(sweep_dir)!r} is in use by another srl sweep") from None
    return fd


def _schedule(plan: Plan, study: Any) -> int:
    running: list[Running] = []
    try:
        while True:
            while len(running) < plan.parallel and counted(study) + len(running) < plan.spec.trials:
                running.append(_start(plan, study))
            if not running:
                return 0
            time.sleep(POLL_S)
            for item in list(running):
                if _watch(plan, item):
                    running.remove(item)
                    _conclude(plan, study, item)
    except KeyboardInterrupt:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        for item in running:
            item.process.stop()
        for item in running:
            item.process.finish(plan.spec.stop_grace_s)
        fail_interrupted(study, [item.trial for item in running])
        print(f"sweep interrupted: {len(running)} running trial(s) stopped; run the same command to continue",
              file=sys.stderr, flush=True)
        running = []
        return 130
    finally:
        for item in running:  # the sweep failed: no trial outlives it
            item.process.kill()


def _start(plan: Plan, study: Any) -> Running:
    trial = study.ask()
    values = suggest(trial, plan.spec)
    seed = plan.spec.trial_seed if plan.spec.trial_seed is not None else plan.spec.seed + trial.number
    run_dir = plan.sweep_dir / f"trial-{trial.number:04d}"
    trial.set_user_attr("run_dir", str(run_dir))
    trial.set_user_attr("seed", seed)
    trial.set_user_attr("values", values)
    overrides = [*plan.spec.overrides, *plan.extra, *(override_text(k, v) for k, v in values.items()), f"run.seed={seed}"]
    if plan.ray_address is not None:  # not in best.yaml: the cluster is the sweep's
        overrides.append(f"launch.ray_address={plan.ray_address}")
    shown = " ".join(override_text(k, v) for k, v in values.items())
    baseline = " (the experiment's own values)" if trial.user_attrs.get("baseline") else ""
    print(f"trial {trial.number} started: {shown} run.seed={seed}{baseline}", flush=True)
    return Running(trial, TrialProcess(run_dir, plan.experiment, overrides), values)


def _watch(plan: Plan, item: Running) -> bool:
    """Report the trial's new checkpoints to the pruner (stopping it if pruned); True once it ended."""
    for row in item.process.new_metrics():
        ret, steps = row.get("episode_return_mean"), row.get("env_steps")
        if ret is None or steps is None or item.pruned:
            continue
        step = int(steps) // plan.report_every_env_steps
        for k in range(item.reported_step + 1, step + 1):  # every checkpoint crossed: the same step in each trial
            item.trial.report(intermediate(plan.spec, float(ret)), k)
        if step > item.reported_step:
            item.reported_step = step
            if item.trial.should_prune():
                item.pruned = True
                item.process.stop()
    item.process.kill_if_stuck(plan.spec.stop_grace_s)
    return item.process.proc.poll() is not None


def _conclude(plan: Plan, study: Any, item: Running) -> None:
    from optuna.trial import TrialState

    code = item.process.finish(plan.spec.stop_grace_s)
    summary = item.process.summary()
    kept = {k: summary.get(k) for k in KEPT_SUMMARY} if summary else {}
    item.trial.set_user_attr("summary", kept)
    item.trial.set_user_attr("exit_code", code)
    number = item.trial.number
    if item.pruned:
        study.tell(item.trial, state=TrialState.PRUNED)
        print(f"trial {number} pruned at {kept.get('env_steps')} env steps (return {kept.get('episode_return_mean')})",
              flush=True)
        return
    value = _objective(plan, kept) if code == 0 else None
    if value is None:
        study.tell(item.trial, state=TrialState.FAIL)
        why = f"exit code {code}" if code != 0 else f"no {plan.spec.objective} in its summary.json"
        print(f"trial {number} failed ({why}): see {item.process.run_dir / LOG_FILE}", file=sys.stderr, flush=True)
        return
    study.tell(item.trial, value)
    print(f"trial {number} done: {plan.spec.objective}={value} ({kept.get('stop_reason')})", flush=True)


def _objective(plan: Plan, summary: dict[str, Any]) -> float | None:
    value = summary.get(plan.spec.objective)
    if plan.spec.objective == "time_to_target_s" and value is None and summary:
        return plan.unreached_s  # the target not reached within the trial's budget
    return None if value is None else float(value)


def _write_results(plan: Plan, study: Any) -> None:
    table = results.rows(study, plan.spec)
    results.write_tables(plan.sweep_dir, table)
    print(results.text_table(table), flush=True)
    best = results.write_best(plan.sweep_dir, study, plan.spec, plan.experiment, plan.extra)
    if best is not None:
        print(f"best config: {best} (srl run {best})", flush=True)
    print(f"results: {plan.sweep_dir / 'results.csv'}, {plan.sweep_dir / 'results.md'}", flush=True)
