"""Experiment files: `srl run path/to/experiment.yaml [key=value ...]`.

The file holds config keys, the names of the `key=value` overrides (nested mappings or dotted keys),
read with the same rules, plus `base:` (a built-in or registered experiment to start from, or another
experiment file: a name ending in .yaml, relative to this file's directory, read with its own base;
none: the plain defaults):

    base: mpe-mappo
    env_kwargs: !replace {module: mpe2.simple_reference_v3, max_cycles: 25}
    algo: {lr: 3.0e-4}          # merged into mpe-mappo's algo settings
    total_env_steps: 500000

A mapping merges into the base's, key by key; `!replace VALUE` sets it whole (the `!` of
`key=!VALUE`); `null` drops the base's value, so the field's default applies (`key=null`);
`!replace null` is None itself (`key=!null`). As on the command line, only `true`/`false` are
booleans (`display: off` is the string "off"). Overrides on the command line apply after the file.

A run's own config.yaml is an experiment file too (`srl run runs/<dir>/config.yaml` runs it again,
as a new run). A file holding a `run.run_id` is such a saved config, every field of it: each value is
taken as it is (set whole; a null is None), except `run_id`, `run_dir`, `resume` and
`if_no_checkpoint`, which are left out. The run is named after the file's `experiment` key, else after the file (its stem).
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from srl.api import registry
from srl.config import (
    RESET,
    ConfigError,
    ExperimentConfig,
    Replace,
    apply_overrides,
    drop_stale_settings,
    import_modules,
    leaves,
    models_in,
    module_entries,
    refuse_moved_twice,
    translate_moved,
    unknown_fields,
)
from srl.experiments import experiment_values

SUFFIXES = (".yaml", ".yml")
BASE = "base"
REPLACE_TAG = "!replace"
_SAVED_ONLY = ("run_id", "run_dir", "resume", "if_no_checkpoint")  # where and as what a saved run ran: not the experiment


def is_experiment_file(name: str) -> bool:
    """`srl run NAME`: a name ending in .yaml or .yml is a file, anything else an experiment name."""
    return name.lower().endswith(SUFFIXES)


class _Loader(yaml.SafeLoader):
    """YAML as `key=value` overrides read it: only true/false are booleans, and `!replace`."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))


def _construct_replace(loader: _Loader, node: yaml.Node) -> Replace:
    if isinstance(node, yaml.MappingNode):
        return Replace(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Replace(loader.construct_sequence(node, deep=True))
    assert isinstance(node, yaml.ScalarNode)  # the third kind of YAML node
    node = yaml.ScalarNode(loader.resolve(yaml.ScalarNode, node.value, (True, False)), node.value,
                           node.start_mark, node.end_mark, node.style)  # its plain type: !replace null is None
    return Replace(loader.construct_object(node, deep=True))


_Loader.add_constructor(REPLACE_TAG, _construct_replace)


def load_experiment_file(path: Path, _within: tuple[Path, ...] = (), imported: list[str] | None = None
                         ) -> dict[str, Any]:
    """The config values of experiment file `path`: its base experiment's, with the file's over them.
    `_within`: the files whose `base:` led here (a file met twice would be its own base). `imported`
    gets the `modules` entries imported here (srl.config.load imports the rest, each once)."""
    raw = _read(path)
    refuse_moved_twice(leaves(raw), f"{path}: ")  # target_return and stop.target_return: one would mask the other
    raw = translate_moved(raw)
    run = raw.get("run")
    if isinstance(run, dict) and run.get("run_id") is not None:  # a run's saved config.yaml: run it again, anew
        raw["run"] = {key: value for key, value in run.items() if key not in _SAVED_ONLY}
        tree = {key: Replace(value) for key, value in raw.items()}
    else:
        tree = translate_moved(_tree(raw, path, ""))  # dotted old keys too: ensemble.population
    base = tree.pop(BASE, None)
    base = None if base is RESET else base
    if base is not None and not isinstance(base, str):
        raise ConfigError(f"{path}: '{BASE}' names a built-in or registered experiment, or a .yaml file, got {base!r}")
    modules = module_entries(apply_overrides({}, tree).get("modules", []))
    import_modules(modules)  # they may register the base experiment
    if imported is not None:
        imported += modules
    values: dict[str, Any] = {}
    if base is not None and is_experiment_file(base):
        values = _base_file(path, base, _within, imported)
    elif base is not None:
        try:
            values = experiment_values(base)
        except registry.UnknownNameError as e:
            raise ConfigError(f"{path}: {BASE}: {e}") from None
    values = apply_overrides(drop_stale_settings(values, tree), tree)
    _check_known(path, tree, values)
    values["experiment"] = values.get("experiment") or path.stem
    return values


def _base_file(path: Path, base: str, within: tuple[Path, ...], imported: list[str] | None) -> dict[str, Any]:
    """The values of experiment file `base` (relative to `path`'s directory), itself read with its
    own base; the run is named after `path`, not after its base."""
    file = Path(base).expanduser()
    file = file if file.is_absolute() else path.parent / file
    chain = (*within, path.resolve())
    if file.resolve() in chain:
        names = " -> ".join(str(p) for p in (*chain, file.resolve()))
        raise ConfigError(f"{path}: {BASE}: {base!r} leads back to a file already read ({names})")
    if not file.is_file():
        raise ConfigError(f"{path}: {BASE}: no experiment file {str(file)!r} (a base ending in .yaml is a file, "
                          "relative to the file that names it)")
    values = load_experiment_file(file, chain, imported)
    values.pop("experiment", None)
    return values


def _read(path: Path) -> dict[Any, Any]:
    try:  # a damaged file is named on one line, not shown as a parser's traceback
        values = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506  (a SafeLoader, plus !replace)
    except FileNotFoundError:
        raise ConfigError(f"no experiment file {str(path)!r} (a name ending in .yaml is read as a file)") from None
    except (yaml.YAMLError, UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"{path}: not a readable YAML file ({' '.join(str(e).split())[:200]})") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: an experiment file is a YAML mapping of config keys, got {type(values).__name__}")
    return values


def _tree(values: dict[Any, Any], path: Path, prefix: str) -> dict[str, Any]:
    """The file's mapping as parse_overrides gives overrides: dotted keys nested, null = RESET."""
    tree: dict[str, Any] = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{path}: key {prefix}{key!r} is not a config key name")
        if isinstance(value, Replace):
            _no_nested_replace(value.value, path, prefix + key)
        elif isinstance(value, dict):
            value = _tree(value, path, f"{prefix}{key}.")
        elif value is None:
            value = RESET
        else:
            _no_nested_replace(value, path, prefix + key)
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{path}: {prefix}{key}: {part!r} is set twice, once as a value")
        if isinstance(value, dict) and isinstance(node.get(leaf), dict):  # `algo.lr` and `algo: {...}`
            value = apply_overrides(node[leaf], value)
        node[leaf] = value
    return tree


def _no_nested_replace(value: Any, path: Path, key: str) -> None:
    """!replace inside a value already set whole, or inside a list, would mean nothing."""
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in inner:
        if isinstance(item, Replace):
            raise ConfigError(f"{path}: {key}: {REPLACE_TAG} inside a value that is set whole means nothing")
        _no_nested_replace(item, path, key)


def _check_known(path: Path, tree: dict[str, Any], values: dict[str, Any]) -> None:
    """The compact unknown-fields error, naming the file, for its keys that no config has."""
    algorithm = values.get("algorithm", ExperimentConfig.model_fields["algorithm"].default)
    try:
        algo_model: type[BaseModel] | None = registry.algorithms.get(algorithm).config_cls
    except registry.UnknownNameError:
        algo_model = None  # build_config names the unknown algorithm
    unknown: dict[type[BaseModel], list[str]] = {}
    _unknown_in(ExperimentConfig, tree, "", unknown, algo_model)
    if unknown:
        raise ConfigError(f"{path}: invalid config: {unknown_fields(unknown, extra={ExperimentConfig: [BASE]})}")


def _unknown_in(model: type[BaseModel], values: dict[str, Any], prefix: str,
                unknown: dict[type[BaseModel], list[str]], algo_model: type[BaseModel] | None = None) -> None:
    """Keys of `values` that `model` lacks, and those of its sections, entries and `algo`."""
    for key, value in values.items():
        field = model.model_fields.get(key)
        if field is None:
            unknown.setdefault(model, []).append(prefix + key)
            continue
        value = value.value if isinstance(value, Replace) else value
        inner = algo_model if key == "algo" else next(iter(models_in(field.annotation)), None)
        kind = typing.get_origin(field.annotation)
        if inner is None:
            continue
        if kind is dict and isinstance(value, dict):  # ray_resources: role -> resources
            entries = [(f"{key}.{k}.", v) for k, v in value.items()]
        elif kind is list and isinstance(value, list):  # env_wrappers
            entries = [(f"{key}.{i}.", v) for i, v in enumerate(value)]
        else:
            entries = [(f"{key}.", value)]
        for inner_prefix, entry in entries:
            if isinstance(entry, dict):
                _unknown_in(inner, entry, prefix + inner_prefix, unknown)
