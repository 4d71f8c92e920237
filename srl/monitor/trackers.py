"""Experiment trackers: where a run's metrics go besides metrics.jsonl (config field `tracker`).

    trackers = open_trackers(config, run_dir)      # one per name in config.monitor.tracker
    tracker.log_config(config.model_dump(mode="json"))
    tracker.log_metrics(4096, {"env_steps": 4096.0, "episode_return_mean": 21.5})
    tracker.log_artifact(run_dir / "learning_curve.png")
    tracker.close(FINISHED)

Every backend gets the same numeric metrics under the same names at the same step (env steps),
the run's resolved config, and the learning curve (and summary.json) at the end:

- tensorboard (default): event files under run_dir/tb; the config as a text summary; the curve
  is left in the run dir (TensorBoard has no artifacts).
- wandb (`pip install 'srl[wandb]'`): a W&B run under run_dir/wandb, with the srl run id as its id
  (run.resume= continues it), project `wandb_project` (else WANDB_PROJECT, else "srl"), grouped by
  experiment; every metric is plotted against `env_steps`. WANDB_MODE=offline works without network
  (`wandb sync run_dir/wandb/offline-run-*` uploads it later).
- mlflow (`pip install 'srl[mlflow]'`): an MLflow run in the experiment named like the srl
  experiment, tagged `srl.run_id` (resume= continues it), at `mlflow_tracking_uri` (else
  MLFLOW_TRACKING_URI, else MLflow's default); the config as params and as config.yaml.

A tracker's failure (a full disk, a tracking server that refuses) is raised as WriteFailed naming
the tracker and where it writes: the run ends as it does when metrics.jsonl cannot be written.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from srl.storage import WriteFailed

FINISHED, FAILED, KILLED = "finished", "failed", "killed"  # how a run ended, for close()
TB_DIR = "tb"
TB_FLUSH_S = 2.0
MLFLOW_PARAM_CHARS = 500  # the shortest limit of MLflow servers in use; the whole config is config.yaml


class Tracker(ABC):
    name: str  # the `tracker` config value
    location: str  # where it writes (a directory, a URI): named in its errors

    @abstractmethod
    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        """Numeric metrics at `step` (env steps)."""

    @abstractmethod
    def log_config(self, config: Mapping[str, Any]) -> None:
        """The run's resolved config (nested dicts as in config.yaml)."""

    @abstractmethod
    def log_artifact(self, path: Path) -> None:
        """A file of the run (the learning curve, summary.json)."""

    @abstractmethod
    def close(self, outcome: str = FINISHED) -> None:
        """End the tracker's run as `outcome` (FINISHED, FAILED, KILLED)."""


# tracker -> the pip extra that installs its package, named as the tracker (None: a dependency of srl)
BACKENDS: dict[str, str | None] = {"tensorboard": None, "wandb": "wandb", "mlflow": "mlflow"}


def missing_package(name: str) -> str | None:
    """Why the tracker `name` cannot run here (its package is not installed), or None."""
    if importlib.util.find_spec(name) is not None:
        return None
    extra = BACKENDS[name]
    install = f"pip install 'srl[{extra}]'" if extra else f"pip install {name}"
    return f"tracker {name!r} needs {name}, which is not installed: {install}"


def open_trackers(config: Any, run_dir: Path) -> list[Tracker]:
    """One tracker per name in `config.monitor.tracker`, in order; each has logged the config. Raises
    WriteFailed (the ones opened are closed) when one cannot start."""
    opened: list[Tracker] = []
    try:
        for name in config.monitor.tracker:
            with tracker_errors(name, _where(name, config, run_dir)):
                tracker = _open(name, config, run_dir)
            opened.append(tracker)
            with tracker_errors(tracker.name, tracker.location):
                tracker.log_config(config.model_dump(mode="json"))
    except BaseException:
        for tracker in opened:
            try:
                tracker.close(FAILED)
            except Exception:  # noqa: BLE001 - the error that stopped the opening is the one to report
                pass
        raise
    return opened


def _open(name: str, config: Any, run_dir: Path) -> Tracker:
    """The one place a config picks its backends."""
    if name == "tensorboard":
        return TensorBoardTracker(run_dir / TB_DIR)
    if name == "wandb":
        project = config.monitor.wandb_project or os.environ.get("WANDB_PROJECT") or "srl"
        return WandbTracker(run_dir, project, config.run.run_id, run_dir.name, config.experiment)
    if name == "mlflow":
        return MlflowTracker(config.monitor.mlflow_tracking_uri, config.experiment, config.run.run_id, run_dir.name)
    raise ValueError(f"unknown tracker {name!r}; trackers are {', '.join(BACKENDS)}")


def _where(name: str, config: Any, run_dir: Path) -> str:
    if name == "tensorboard":
        return str(run_dir / TB_DIR)
    if name == "wandb":
        return str(run_dir / "wandb")
    return config.monitor.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "mlflow's default tracking URI"


@contextmanager
def tracker_errors(name: str, location: str) -> Iterator[None]:
    """Any failure inside becomes WriteFailed naming the tracker and where it writes: an OSError
    keeps its errno; a backend's own error (an MlflowException, a wandb error) its one-line message."""
    where = f"{location} ({name})"
    try:
        yield
    except WriteFailed:
        raise
    except OSError as e:
        raise WriteFailed.of(where, e) from e
    except Exception as e:  # noqa: BLE001 - each backend raises its own types
        message = " ".join(str(e).split())[:1000]
        raise WriteFailed(None, f"{type(e).__name__}: {message}" if message else type(e).__name__, where) from e


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> {"algo.lr": "0.0003", ...}: lists and None as JSON, every value a string."""
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_params(value, f"{name}."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value)
    return out


# ---------------------------------------------------------------- TensorBoard


@functools.cache  # once per process
def _quiet_tensorboard_thread() -> None:
    """TensorBoard writes event files in a thread that keeps its error for the next add_scalar
    (where TensorBoardTracker reports it, naming the directory) and then re-raises it: without this
    the thread would print the same fault again as a raw traceback. Other threads' errors still print."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if type(args.thread).__name__ == "_AsyncWriterThread" and isinstance(args.exc_value, OSError):
            return
        previous(args)

    threading.excepthook = hook


class TensorBoardTracker(Tracker):
    name = "tensorboard"

    def __init__(self, log_dir: Path) -> None:
        # Imported here: it costs about a second, and a run without TensorBoard never pays it.
        from torch.utils.tensorboard import SummaryWriter

        _quiet_tensorboard_thread()
        self.location = str(log_dir)
        self._writer = SummaryWriter(log_dir=str(log_dir), flush_secs=int(TB_FLUSH_S))
        self._last_flush = time.monotonic()

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        for name, value in metrics.items():
            self._writer.add_scalar(name, value, global_step=step)
        if time.monotonic() - self._last_flush >= TB_FLUSH_S:
            self.flush()

    def log_config(self, config: Mapping[str, Any]) -> None:
        import yaml

        text = yaml.safe_dump(dict(config), sort_keys=False)
        # indented: TensorBoard renders text as Markdown, and this keeps it a code block
        self._writer.add_text("config", "".join(f"    {line}\n" for line in text.splitlines()), global_step=0)

    def log_artifact(self, path: Path) -> None:
        """TensorBoard keeps no files: the artifact stays in the run dir beside tb/."""

    def flush(self) -> None:
        self._writer.flush()
        self._last_flush = time.monotonic()

    def close(self, outcome: str = FINISHED) -> None:
        self._writer.close()


# ---------------------------------------------------------------- Weights & Biases


class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, run_dir: Path, project: str, run_id: str | None, run_name: str, group: str) -> None:
        import wandb

        self.location = str(run_dir / "wandb")
        # console off: W&B would otherwise capture this process's output, live table included
        self._run = wandb.init(project=project, id=run_id, name=run_name, group=group, dir=str(run_dir),
                               resume="allow", settings=wandb.Settings(console="off"))
        # env_steps is the x axis of every metric: a resumed run's steps go back to its checkpoint,
        # which W&B's own step (monotonic) would refuse
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        self._run.log({**metrics, "env_steps": step})

    def log_config(self, config: Mapping[str, Any]) -> None:
        self._run.config.update(dict(config), allow_val_change=True)  # resume= may change a setting

    def log_artifact(self, path: Path) -> None:
        # a copy in the W&B run's own files: a link (what wandb.save makes) dies with the run dir
        target = Path(self._run.dir) / path.name
        shutil.copyfile(path, target)
        self._run.save(str(target), base_path=self._run.dir, policy="now")

    def close(self, outcome: str = FINISHED) -> None:
        self._run.finish(exit_code={FINISHED: 0, KILLED: 130}.get(outcome, 1))


# ---------------------------------------------------------------- MLflow


class MlflowTracker(Tracker):
    name = "mlflow"

    def __init__(self, tracking_uri: str | None, experiment: str, run_id: str | None, run_name: str) -> None:
        from mlflow.tracking import MlflowClient

        self._client = MlflowClient(tracking_uri=tracking_uri)  # None: MLFLOW_TRACKING_URI, else the default
        self.location = str(self._client.tracking_uri)
        experiment_id = self._experiment_id(experiment)
        found = self._client.search_runs(
            [experiment_id], filter_string=f"tags.`srl.run_id` = '{run_id}'", max_results=1
        ) if run_id else []
        if found:  # resume=: the same MLflow run goes on
            self._run_id = found[0].info.run_id
            self._params = dict(found[0].data.params)
            self._client.update_run(self._run_id, status="RUNNING")
        else:
            tags = {"srl.run_id": run_id or "", "srl.experiment": experiment}
            self._run_id = self._client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
            self._params = {}

    def _experiment_id(self, name: str) -> str:
        found = self._client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        try:
            return self._client.create_experiment(name)
        except Exception:  # noqa: BLE001 - another run created it meanwhile
            found = self._client.get_experiment_by_name(name)
            if found is None:
                raise
            return found.experiment_id

    def log_metrics(self, step: int, metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        rows = [Metric(name, float(value), now_ms, step) for name, value in metrics.items()]
        for start in range(0, len(rows), 1000):  # MLflow takes at most 1000 metrics per batch
            self._client.log_batch(self._run_id, metrics=rows[start:start + 1000])

    def log_config(self, config: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        # params cannot change once logged: a resumed run adds only the new ones; config.yaml is this launch's
        params = [Param(k, v[:MLFLOW_PARAM_CHARS]) for k, v in flat_params(config).items() if k not in self._params]
        for start in range(0, len(params), 100):  # at most 100 params per batch
            self._client.log_batch(self._run_id, params=params[start:start + 100])
        self._params.update({p.key: p.value for p in params})
        self._client.log_dict(self._run_id, dict(config), "config.yaml")

    def log_artifact(self, path: Path) -> None:
        self._client.log_artifact(self._run_id, str(path))

    def close(self, outcome: str = FINISHED) -> None:
        status = {FINISHED: "FINISHED", KILLED: "KILLED"}.get(outcome, "FAILED")
        self._client.set_terminated(self._run_id, status=status)
