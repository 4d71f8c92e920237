"""The sweep file: what to search, how to score a trial, how many trials, how many at once.

    objective: time_to_target_s        # a summary.json field (OBJECTIVES)
    trials: 20
    overrides: [stop.total_env_steps=200000, target_return=475, time_limit_s=120]
    space:
      algo.lr: {log_uniform: [1.0e-4, 3.0e-3]}
      algo.epochs: {int: [2, 10]}
      envs_per_actor: {choice: [8, 16, 32]}
    pruner: {median: {n_warmup_steps: 3}}

Every error names the field (`space.algo.lr: ...`) and is raised before any trial starts; the
space's keys and values are checked against the experiment's config in `check_against_config`.
"""

from __future__ import annotations

import builtins
import inspect
import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from srl.config import ConfigError, ExperimentConfig, moved_key, refuse_moved_twice

# summary.json fields a trial can be scored on, and which way is better
Direction = Literal["minimize", "maximize"]
OBJECTIVES: dict[str, Direction] = {
    "time_to_target_s": "minimize",
    "episode_return_mean": "maximize",
    "wall_time_s": "minimize",
    "env_steps_per_s": "maximize",
}
KINDS = ("uniform", "log_uniform", "int", "log_int", "choice")
PRUNERS = ("none", "median", "percentile", "threshold")
# the sweep sets these on every trial itself (its own run dir, its seed)
SWEEP_OWNED = ("run.run_dir", "run.resume", "run.run_id", "run.seed")


class Param(BaseModel):
    """One searched key: exactly one of the kinds, e.g. {log_uniform: [1.0e-4, 3.0e-3]}."""

    model_config = ConfigDict(extra="forbid")
    uniform: tuple[float, float] | None = None
    log_uniform: tuple[float, float] | None = None
    int: tuple[builtins.int, builtins.int] | None = None
    log_int: tuple[builtins.int, builtins.int] | None = None
    choice: list[Any] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _one_kind(self) -> Param:
        given = [k for k in KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(KINDS)} (got {', '.join(given) or 'none'})")
        kind = given[0]
        if kind != "choice":
            low, high = getattr(self, kind)
            if not low <= high:
                raise ValueError(f"{kind}: low {low} is above high {high}")
            if kind.startswith("log") and low <= 0:
                raise ValueError(f"{kind}: bounds must be positive for a log scale (got {low})")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    def corners(self) -> list[Any]:
        """Values that stand for the whole range when checking it against the config."""
        return list(self.choice) if self.choice is not None else list(getattr(self, self.kind))


class SweepSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    objective: Literal[tuple(OBJECTIVES)] = Field(  # type: ignore[valid-type]
        "time_to_target_s", description="The summary.json field a trial is scored on.")
    direction: Literal["minimize", "maximize"] | None = Field(
        None, description="Which way is better; none: the objective's own (OBJECTIVES).")
    trials: int = Field(20, ge=1, le=100_000, description="Trials in the study, counting those of earlier runs.")
    parallel: int | None = Field(None, ge=1, le=1024, description="Trials at once; none: as many as the CPUs hold.")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Seed of the sampler (TPE).")
    trial_seed: int | None = Field(
        None, ge=0, le=2**32 - 1, description="srl seed of every trial; none: seed + the trial's number.")
    overrides: list[str] = Field(default_factory=list, description="key=value overrides of every trial.")
    space: dict[str, Param] = Field(min_length=1, description="Searched config keys and their ranges.")
    pruner: dict[str, dict[str, Any] | None] = Field(
        {"none": None}, description="One pruner and its arguments.")  # pydantic copies it for each spec
    report_every_env_steps: int | None = Field(
        None, ge=1, description="Env steps between the mean returns reported to the pruner; none: total_env_steps/20.")
    unreached_s: float | None = Field(
        None, ge=0, description="time_to_target_s of a trial that never reached the target; none: its time_limit_s, "
        "else infinity.")
    baseline: bool = Field(
        False, description="Run the experiment's own values of the space's keys first (trial 0), to compare with.")
    stop_grace_s: float = Field(60.0, gt=0, description="Seconds a stopped trial has to write its summary.")

    @field_validator("pruner")
    @classmethod
    def _one_pruner(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(value) != 1 or next(iter(value)) not in PRUNERS:
            raise ValueError(f"one of {', '.join(PRUNERS)} with its arguments, e.g. {{median: {{n_warmup_steps: 3}}}} "
                             f"(got {', '.join(map(str, value)) or 'none'})")
        return value

    @field_validator("overrides")
    @classmethod
    def _owned(cls, value: list[str]) -> list[str]:
        for item in value:
            _refuse_owned(moved_key(item.partition("=")[0]), item)
        return value

    @field_validator("space")
    @classmethod
    def _space_owned(cls, value: dict[str, Param]) -> dict[str, Param]:
        refuse_moved_twice(list(value.items()))  # target_return and stop.target_return: one would be lost
        value = {moved_key(key): param for key, param in value.items()}  # old flat keys read as their sections'
        for key in value:
            _refuse_owned(key, key)
        return value

    @property
    def best_direction(self) -> Direction:
        return self.direction or OBJECTIVES[self.objective]

    def pruner_args(self) -> tuple[str, dict[str, Any]]:
        name, args = next(iter(self.pruner.items()))
        return name, dict(args or {})


def _refuse_owned(key: str, given: str) -> None:
    """A key the sweep sets on every trial itself (SWEEP_OWNED) is not the sweep file's to give."""
    if key in SWEEP_OWNED:
        hint = "use trial_seed in the sweep file" if key == "run.seed" else "each trial runs in its own directory"
        raise ValueError(f"{given!r}: the sweep sets {key} itself ({hint})")


def load_sweep_file(path: Path) -> SweepSpec:
    """The sweep file, checked; ConfigError naming the file and the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"no sweep file {str(path)!r}") from None
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{path}: not a readable YAML file ({' '.join(str(e).split())[:200]})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: a sweep file is a YAML mapping (objective, trials, space, ...), "
                          f"got {type(raw).__name__}")
    return parse_spec(raw, str(path))


def parse_spec(raw: dict[str, Any], where: str) -> SweepSpec:
    try:
        spec = SweepSpec.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{where}: {_format(e)}") from None
    _check_pruner(spec, where)
    return spec


def _format(error: ValidationError) -> str:
    lines = []
    for err in error.errors():
        loc = [str(p) for p in err["loc"] if not str(p).startswith(("function-after", "tuple["))]
        field = ".".join(loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            parent = SweepSpec if len(loc) == 1 else Param
            msg = f"unknown field; allowed: {', '.join(parent.model_fields)}"
        elif err["type"] == "missing":
            msg = "required" + ("; e.g. space: {algo.lr: {log_uniform: [1.0e-4, 3.0e-3]}}" if field == "space" else "")
        got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
        lines.append(f"field {field!r}: {msg}{got}")
    return "invalid sweep file: " + "; ".join(lines)


def pruner_class(name: str) -> Any:
    """The Optuna pruner a sweep file's `pruner` names."""
    import optuna

    return {"median": optuna.pruners.MedianPruner, "percentile": optuna.pruners.PercentilePruner,
            "threshold": optuna.pruners.ThresholdPruner}[name]


def _check_pruner(spec: SweepSpec, where: str) -> None:
    """The pruner's arguments are its Optuna class's (threshold: lower/upper on the mean return)."""
    name, args = spec.pruner_args()
    if name == "none":
        if args:
            raise ConfigError(f"{where}: field 'pruner.none' takes no arguments (got {', '.join(args)})")
        return
    allowed = [p for p in inspect.signature(pruner_class(name)).parameters if p != "self"]
    unknown = [key for key in args if key not in allowed]
    if unknown:
        raise ConfigError(f"{where}: field 'pruner.{name}': unknown argument {', '.join(map(repr, unknown))}; "
                          f"allowed: {', '.join(allowed)}")


def override_text(key: str, value: Any) -> str:
    """`key=value` as srl parses it: the value as JSON, which is YAML (strings quoted, lists kept)."""
    if isinstance(value, float) and math.isinf(value):
        return f"{key}={'.inf' if value > 0 else '-.inf'}"  # YAML's infinity (JSON has none)
    return f"{key}={json.dumps(value)}"


def config_value(config: Any, key: str) -> Any:
    """The value of dotted `key` in a loaded config (algo.lr, policy_kwargs.hidden_sizes)."""
    value = config
    for part in key.split("."):
        value = value[part] if isinstance(value, dict) else getattr(value, part)
    return value


def check_against_config(spec: SweepSpec, experiment: str, extra: list[str]) -> ExperimentConfig:
    """The config with the fixed overrides, and every key of the space, at its range's ends (every
    choice), loads as a config with them: a bad key or value is a ConfigError naming it before any
    trial starts."""
    from srl.config.load import load_config

    fixed, nowhere = [*spec.overrides, *extra], "run.run_dir=/nonexistent/srl-sweep-check"
    try:
        config = load_config(experiment, [*fixed, nowhere])
    except ConfigError as e:
        raise ConfigError(f"overrides: {e}") from None
    for key, param in spec.space.items():
        for value in param.corners():
            try:
                load_config(experiment, [*fixed, override_text(key, value), nowhere])
            except ConfigError as e:
                raise ConfigError(f"space.{key}: {key}={value!r}: {e}") from None
    return config
