"""docs/config.md, generated (`srl config-doc`): every field of the experiment config and of each
registered algorithm. Apart from the schema (srl.config.schema), which must not import the built-ins it documents."""

from __future__ import annotations

from pydantic import BaseModel

from srl.api import registry
from srl.config import (
    MOVED,
    EnsembleConfig,
    EnvWrapper,
    ExperimentConfig,
    HerConfig,
    LeagueSpec,
    PolicySpec,
    ReplayConfig,
)


def config_reference() -> str:
    """docs/config.md: every field of the experiment config and of each registered algorithm."""
    import srl.builtins  # noqa: F401

    def table(model: type[BaseModel]) -> list[str]:
        rows = ["| field | type | default | meaning |", "| --- | --- | --- | --- |"]
        for name, f in model.model_fields.items():
            kind = f.annotation.__name__ if isinstance(f.annotation, type) else str(f.annotation)
            kind = kind.replace("typing.", "").replace("srl.api.algorithm.", "").replace("srl.config.schema.", "srl.config.").replace("|", "\\|")
            default = "(required)" if f.is_required() else f.get_default(call_default_factory=True)
            default = "(section below)" if isinstance(default, BaseModel) else repr(default)
            rows.append(f"| `{name}` | `{kind}` | `{default}` | {f.description or ''} |")
        return rows

    lines = ["# Config reference", "", "Generated from `srl/config/schema.py` by `srl config-doc`; do not edit.", ""]
    lines += [("`key=value` overrides are YAML values over the experiment's: `a.b=1` or `a={b: 1}` merge into a "
               "dict, `a=!{b: 1}` replaces it whole, `a=null` drops the experiment's value (the default applies), "
               "`a=!null` is None itself. A new `algorithm` (`policy`) drops the experiment's `algo.*` "
               "(`policy_kwargs`) unless given with it."), ""]
    lines += ["## Experiment (`srl run EXPERIMENT key=value ...`)", "", *table(ExperimentConfig), ""]
    for name, field in ExperimentConfig.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            lines += [f"## `{name}.*`: {field.description}", "", *table(field.annotation), ""]
    lines += [("An experiment file (`srl run FILE.yaml key=value ...`) holds the same keys, read by the same "
               "rules, with `!replace VALUE` for `!` and `base: EXPERIMENT` to start from (srl.config.files, "
               "docs/custom.md)."), ""]
    lines += ["## `env_wrappers` entries", "", *table(EnvWrapper), ""]
    lines += ["## `replay.*` (the buffer worker)", "", *table(ReplayConfig), ""]
    lines += ["## `replay.her.*` (hindsight experience replay)", "", *table(HerConfig), ""]
    lines += ["## `pod.ensemble.*` (a tournament of pods)", "", *table(EnsembleConfig), ""]
    lines += ["## `policies.<name>.*` (several policies in one run, docs/multiagent.md)", "", *table(PolicySpec), ""]
    lines += ["## `policies.<name>.league.*` (a self-play league)", "", *table(LeagueSpec), ""]
    lines += ["## Keys before sections", "", (
        "Read as the new key, with a one-line note. An old key and its new name in one input (one experiment "
        "file; the overrides of one command, a sweep file's included; a sweep's space) are refused before launch, naming both: "
        "in `target_return=475 stop.target_return=300` one of the two would otherwise go unused without a word "
        "(srl before this took the old one, in either order). Across inputs the later one wins, as for any key: an override "
        "`stop.target_return=300` over an experiment file's `target_return: 475` gives 300."), "",
              "| old key | new key |", "| --- | --- |", *(f"| `{old}` | `{new}` |" for old, new in MOVED.items()), ""]
    for name in registry.algorithms.names():
        if not registry.algorithms.get(name).config_cls.__module__.startswith("srl."):
            continue  # users' own algorithms are documented by their users
        lines += [f"## `algo.*` for `algorithm={name}`", "", *table(registry.algorithms.get(name).config_cls), ""]
    return "\n".join(lines)
