"""The Optuna study of a sweep: kept in study.db (sqlite) in the sweep directory.

Running the same `srl sweep` again opens the same study: finished trials (complete, pruned,
failed) count toward `trials` and are kept; a trial that was running when the sweep ended
(Ctrl-C, a kill, a reboot) is marked failed ("interrupted") and its parameters are queued again,
so the retry runs first. A study made for another experiment, objective or space is refused:
its values would not compare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from srl.config import ConfigError
from srl.sweep.spec import SweepSpec, pruner_class

STUDY_FILE = "study.db"
STUDY_NAME = "srl-sweep"
INTERRUPTED = "interrupted"  # user attr of a trial the sweep did not see end


def make_pruner(spec: SweepSpec) -> Any:
    """The intermediate values are the mean return, negated in a minimize study (so the pruner
    compares in the study's direction); threshold's lower/upper are on the return itself."""
    import optuna

    name, args = spec.pruner_args()
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "threshold" and spec.best_direction == "minimize":
        lower, upper = args.pop("lower", None), args.pop("upper", None)
        args["upper"] = None if lower is None else -lower
        args["lower"] = None if upper is None else -upper
    try:
        return pruner_class(name)(**args)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"field 'pruner.{name}': {e}") from None


def intermediate(spec: SweepSpec, episode_return_mean: float) -> float:
    return -episode_return_mean if spec.best_direction == "minimize" else episode_return_mean


def identity(spec: SweepSpec, experiment: str, extra: list[str]) -> dict[str, Any]:
    """What a resumed study must share with the sweep that made it."""
    return {"experiment": experiment, "overrides": [*spec.overrides, *extra], "objective": spec.objective, "direction": spec.best_direction,
            "space": {key: param.model_dump(exclude_none=True) for key, param in spec.space.items()}}


def open_study(sweep_dir: Path, spec: SweepSpec, experiment: str, extra: list[str]) -> Any:
    """The sweep's study, new or resumed (its interrupted trials failed and queued again)."""
    import optuna
    from optuna.storages import RDBStorage

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    storage = RDBStorage(f"sqlite:///{(sweep_dir / STUDY_FILE).resolve()}")
    study = optuna.create_study(
        storage=storage, study_name=STUDY_NAME, load_if_exists=True, direction=spec.best_direction,
        pruner=make_pruner(spec),
    )
    # a resumed sweep's sampler starts a fresh stream: seeded as the first run was, it would draw
    # the first run's random start-up points again
    study.sampler = optuna.samplers.TPESampler(seed=spec.seed + len(study.trials))
    mine = json.loads(json.dumps(identity(spec, experiment, extra)))
    saved = study.user_attrs.get("identity")
    if saved is None:
        study.set_user_attr("identity", mine)
    else:
        for key in mine:
            if saved.get(key) != mine[key]:
                raise ConfigError(f"{sweep_dir}: its study was made with {key}={saved.get(key)!r}, this sweep has "
                                  f"{mine[key]!r}; choose another sweep directory (--dir) to start a new study")
    fail_interrupted(study, [t for t in study.get_trials(deepcopy=False)
                             if t.state == optuna.trial.TrialState.RUNNING])
    return study


def fail_interrupted(study: Any, trials: list[Any]) -> None:
    """Mark trials that did not end under the sweep's eye failed, and queue their parameters again."""
    from optuna.trial import TrialState

    for trial in trials:
        study._storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
        study.tell(trial.number, state=TrialState.FAIL)
        study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number}, skip_if_exists=False)


def counted(study: Any) -> int:
    """Trials that count toward `trials`: ended ones, less those interrupted (they are retried)."""
    from optuna.trial import TrialState

    ended = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return sum(1 for t in study.get_trials(deepcopy=False)
               if t.state in ended and not t.user_attrs.get(INTERRUPTED))


def suggest(trial: Any, spec: SweepSpec) -> dict[str, Any]:
    """The trial's config values, one per key of the space."""
    values = {}
    for key, param in spec.space.items():
        kind = param.kind
        if kind == "choice":
            values[key] = _choose(trial, key, param.choice or [])
        else:
            draw = trial.suggest_float if kind in ("uniform", "log_uniform") else trial.suggest_int
            values[key] = draw(key, *getattr(param, kind), log=kind.startswith("log"))
    return values


def as_params(spec: SweepSpec, values: dict[str, Any]) -> dict[str, Any]:
    """Config values as Optuna's parameters (for enqueue_trial): a list or mapping choice as JSON."""
    return {key: value if _plain(spec.space[key].choice or []) else json.dumps(value) for key, value in values.items()}


def _plain(choices: list[Any]) -> bool:
    return all(c is None or isinstance(c, (bool, int, float, str)) for c in choices)


def _choose(trial: Any, key: str, choices: list[Any]) -> Any:
    """Optuna takes only plain choices; a list or mapping goes in as its JSON text."""
    if _plain(choices):
        return trial.suggest_categorical(key, choices)
    return json.loads(trial.suggest_categorical(key, [json.dumps(c) for c in choices]))
