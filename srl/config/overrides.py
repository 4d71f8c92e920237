"""How given values become the schema's (srl.config.schema): old flat keys moved to their sections
(`MOVED`), `key=value` overrides parsed and laid over an experiment's values, a run's saved
config.yaml read back, and a validation error as one line naming the field and what it allows.

Every input is read through here: an experiment file (srl.config.files), the command line and a
saved config (srl.config.load), a sweep (srl.sweep.spec).
"""

from __future__ import annotations

import difflib
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from srl.config.schema import ConfigError, ExperimentConfig

_WORDS = {"on", "off", "yes", "no", "y", "n"}


class _Reset:
    """`key=null`: drop the experiment's value, so the field's default applies."""

    def __repr__(self) -> str:
        return "RESET"


RESET = _Reset()


@dataclass(frozen=True)
class Replace:
    """`key=!value`: the value whole, where a dict would otherwise be merged into the experiment's."""

    value: Any


# The one table of moved keys: each flat key of the config before it had sections, and its place now.
# Input with an old key (an experiment, an experiment file, an override, a saved config.yaml, a
# sweep) is read as the new one, with a one-line note naming it (once per key and process). An old
# key and its new name both given in one input are refused (refuse_moved_twice): either would
# silently undo the other.
MOVED = {
    **{k: f"run.{k}" for k in ("seed", "run_dir", "resume", "run_id", "deterministic", "checkpoint_interval_s")},
    **{k: f"launch.{k}" for k in (
        "launcher", "num_actor_workers", "num_policy_workers", "num_trainers", "torch_threads", "trainer_torch_threads",
        "heartbeat_timeout_s", "stall_timeout_s", "worker_memory_limit_mib", "max_restarts", "restart_window_s", "max_nonfinite_updates",
        "ray_address", "ray_resources", "ray_placement_timeout_s")},
    **{k: f"dataflow.{k}" for k in (
        "envs_per_actor", "ring_splits", "inference", "sample_length", "segment_slots", "batch_segments",
        "max_policy_lag", "nonfinite_env", "transport", "bind_host", "max_queued_bytes_per_peer")},
    **{k: f"stop.{k}" for k in ("max_updates", "total_env_steps", "target_return", "time_limit_s")},
    **{k: f"monitor.{k}" for k in ("log_interval_s", "display", "progress_interval_s", "tracker", "wandb_project",
                                   "mlflow_tracking_uri", "learning_curve")},
    "eval_episodes": "eval.episodes", "eval_interval_s": "eval.interval_s",
    "pod": "pod.enabled", "device": "pod.device", "ensemble": "pod.ensemble",
    "epsilon": "algo.epsilon", "epsilon_alpha": "algo.epsilon_alpha",  # DQN's and R2D2's own now
}
_noted: set[str] = set()


def translate_moved(values: dict[str, Any]) -> dict[str, Any]:
    """`values` (plain, or an override tree with RESET and Replace) with every old flat key moved to
    its section (MOVED), each noted once on stderr. A section given by its own name (`pod: {...}`)
    stays. ConfigError where an old key and its new name are both given (refuse_moved_twice)."""
    refuse_moved_twice(leaves(values))
    out = dict(values)
    for old, new in MOVED.items():
        if old not in out or (new.startswith(old + ".") and isinstance(_unwrapped(out[old]), dict)):
            continue
        value = out.pop(old)
        section, leaf = new.split(".")
        # the section is absent or a plain mapping that lacks `leaf` (refuse_moved_twice refused the rest),
        # except `pod: true` itself, which was the section's key
        inner = out.get(section)
        inner = dict(inner) if isinstance(inner, dict) else {}
        inner[leaf] = _joined(inner.get(leaf), value)  # ensemble.population beside pod.ensemble.eval_episodes
        out[section] = inner
        _note_moved(old)
    return out


def _note_moved(old: str) -> None:
    if old not in _noted:
        _noted.add(old)
        print(f"note: config key {old!r} is now {MOVED[old]!r}; the old name still works", file=sys.stderr)


def _joined(new: Any, old: Any) -> Any:
    """Two mappings of one section, with no key in common (refuse_moved_twice), as one."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {**new, **{key: _joined(new.get(key), value) for key, value in old.items()}}
    return old


def leaves(values: dict[Any, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of every value a nested mapping sets: a plain mapping merges key by key
    (apply_overrides), so its own keys are what it sets; anything else (a Replace, RESET, a list) is one."""
    out: list[tuple[str, Any]] = []
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out += leaves(value, f"{prefix}{key}.")
        elif not isinstance(value, dict):
            out.append((f"{prefix}{key}", value))
    return out


def refuse_moved_twice(given: list[tuple[str, Any]], where: str = "") -> None:
    """ConfigError naming both keys where one input sets a field by its old name (MOVED) and by its
    new one: whichever was read last would silently undo the other (a script's `target_return=475`
    and the user's `stop.target_return=300`). Dotted keys: ensemble.population and
    pod.ensemble.population clash; stop=null clashes with target_return (it drops what the other sets)."""
    seen: list[tuple[str, str, bool]] = []  # key as given, its place now, given by its old name
    for key, _ in given:
        place = moved_key(key)
        old = place != key
        for other, other_place, other_old in seen:
            if old != other_old and _overlap(place, other_place):
                old_key, new_key = (key, other) if old else (other, key)
                now = moved_key(old_key)
                raise ConfigError(f"{where}config keys {old_key!r} and {new_key!r} both set {now!r} ({old_key!r} is "
                                  f"its old name): give it once, as {now!r}")
        seen.append((key, place, old))


def _overlap(a: str, b: str) -> bool:
    """Dotted keys a and b name the same field, or one a part of the other."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def moved_key(key: str) -> str:
    """Dotted `key` with an old flat first part moved (MOVED): total_env_steps -> stop.total_env_steps,
    ensemble.population -> pod.ensemble.population; pod.device stays."""
    first, dot, rest = key.partition(".")
    new = MOVED.get(first)
    if new is None or (rest and new.startswith(first + ".")):
        return key
    return new + dot + rest


def _unwrapped(value: Any) -> Any:
    return value.value if isinstance(value, Replace) else value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """["a=1", "algo.lr=3e-4", "b=null", "c=!{x: 1}"] -> {"a": 1, "algo": {"lr": 0.0003}, "b": RESET,
    "c": Replace({"x": 1})}; values parsed as YAML (`!null` is None itself, `null` the default).
    ConfigError where an old key and its new name are both given (refuse_moved_twice)."""
    given: list[tuple[str, Any, str]] = []
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not of the form key=value")
        replace = text.startswith("!")
        text = text[1:] if replace else text
        try:  # YAML 1.1 reads on/off/yes/no as booleans; only true/false are booleans here
            value = text if text.lower() in _WORDS else (yaml.safe_load(text) if text else None)
        except yaml.YAMLError as e:
            raise ConfigError(f"override {item!r}: not a YAML value ({e.__class__.__name__})") from None
        given.append((key, Replace(value) if replace else (RESET if value is None else value), item))
    refuse_moved_twice([leaf for key, value, _ in given for leaf in leaves({key: value})])
    tree: dict[str, Any] = {}
    for key, value, item in given:
        *parents, leaf = moved_leaf(key, value).split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {part!r} is not a section")
        node[leaf] = value
    return tree


def moved_leaf(key: str, value: Any) -> str:
    """`pod=true` is pod.enabled=true where it is read into a tree: as `pod` it would overwrite, or be
    overwritten by, the section that pod.device=... makes (the old key named what is now its section)."""
    new = MOVED.get(key, "")
    if not new.startswith(key + ".") or isinstance(_unwrapped(value), dict):
        return key
    _note_moved(key)
    return new


def apply_overrides(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` (parse_overrides) over `base`: dicts merge key by key, RESET drops a key, Replace sets a value whole."""
    out = dict(base)
    for key, value in top.items():
        if value is RESET:
            out.pop(key, None)
        elif isinstance(value, Replace):
            out[key] = value.value
        elif isinstance(value, dict):
            out[key] = apply_overrides(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = value
    return out


# A new choice does not inherit the experiment's settings of the old one (`algorithm=sac` on a PPO
# experiment: its algo.* are PPO's); settings given on the command line still apply.
_SETTINGS_OF = {"algorithm": "algo", "policy": "policy_kwargs"}


def drop_stale_settings(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    merged = apply_overrides(base, top)
    stale = {settings for choice, settings in _SETTINGS_OF.items() if _chosen(merged, choice) != _chosen(base, choice)}
    return {key: value for key, value in base.items() if key not in stale}


def _chosen(values: dict[str, Any], field: str) -> Any:
    return values.get(field, ExperimentConfig.model_fields[field].default)


def format_error(error: ValidationError, prefix: str, model: type[BaseModel]) -> str:
    lines: list[str] = []
    unknown: dict[type[BaseModel], list[str]] = {}  # model -> its unknown fields, listed once with what it allows
    for err in error.errors():
        field = prefix + ".".join(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden":
            unknown.setdefault(owner(model, err["loc"][:-1]), []).append(field)
        else:
            got = f" (got {err['input']!r})" if "input" in err and not isinstance(err["input"], dict) else ""
            lines.append(f"field {field!r}: {err['msg']}{got}")
    if unknown:
        lines.insert(0, unknown_fields(unknown))
    return "invalid config: " + "; ".join(lines)


def owner(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel]:
    """The model whose fields are at `loc` inside `model` (dict keys and list indexes pass through)."""
    for part in loc:
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is not None:
            model = next(iter(models_in(field.annotation)), model)
    return model


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type holds: RunConfig, ReplayConfig | None, dict[str, RayResources], ..."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in models_in(arg)]


def unknown_fields(unknown: dict[type[BaseModel], list[str]], extra: dict[Any, list[str]] | None = None) -> str:
    """"unknown field 'x'; allowed fields: ..." for each model's unknown fields (`extra`: more allowed)."""
    lines = []
    for inner, fields in unknown.items():
        noun = "field" if len(fields) == 1 else "fields"
        allowed = ", ".join([*(extra or {}).get(inner, []), *inner.model_fields]) or "none"
        near = [MOVED[m] for f in fields for m in difflib.get_close_matches(f, MOVED, n=1)] * (inner is ExperimentConfig)
        hint = f" (in a section: {', '.join(near)}?)" if near else ""
        lines.append(f"unknown {noun} {', '.join(map(repr, fields))}{hint}; allowed fields: {allowed}")
    return "; ".join(lines)


def load_saved_config(run_dir: Path, named_by: str = "field 'run.resume'") -> dict[str, Any]:
    """The config.yaml of the run in `run_dir`, as saved; a ConfigError begins with `named_by` (what
    named the directory: run.resume=, or `srl eval RUN_DIR`) where the directory holds none."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        found = "has no config.yaml (not a run directory)" if run_dir.is_dir() else (
            "is not a directory" if run_dir.exists() else "does not exist")
        raise ConfigError(f"{named_by}: {str(run_dir)!r} {found}")
    try:  # a damaged file is named on one line, not shown as a parser's traceback
        values = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{path}: not a readable YAML config ({' '.join(str(e).split())[:200]})") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: not a config (a YAML mapping of fields), got {type(values).__name__}")
    return translate_moved(values)
