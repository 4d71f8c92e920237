"""From what `srl run` is given to the config a run uses: `load_config(experiment, overrides)`.

`experiment` is a registered experiment's name or an experiment file (srl.config.files); its
values, with the `key=value` overrides over them, are checked by srl.config.checks.typed_config. A
module of its own: experiment files build on the config's types, so the loading that resolves
them cannot live in the schema (srl.config.schema) without an import circle.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from srl.api import registry
from srl.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    drop_stale_settings,
    import_modules,
    load_saved_config,
    module_entries,
    parse_overrides,
    translate_moved,
)
from srl.config.checks import typed_config
from srl.config.files import is_experiment_file, load_experiment_file
from srl.experiments import experiment_values


def load_config(experiment: str, overrides: list[str] | None = None) -> ExperimentConfig:
    """Built-in or registered experiment by name, or an experiment file (a .yaml path), with
    `key=value` overrides applied."""
    import srl.builtins  # noqa: F401

    top = translate_moved(parse_overrides(overrides or []))
    given = apply_overrides({}, top)
    imported = module_entries(given.get("modules", []))
    import_modules(imported)  # before the experiment is looked up: they may register it
    run = given.get("run")
    if resume := run.get("resume") if isinstance(run, dict) else None:
        base = load_saved_config(Path(str(resume)))
        # a resumed run goes on writing where it was; a start_fresh of an earlier launch is not this one's
        base["run"] = {**base.get("run", {}), "run_dir": str(resume), "if_no_checkpoint": "refuse"}
    else:
        base = _experiment_values(experiment, imported)
    base = drop_stale_settings(base, top)
    values = apply_overrides(base, top)  # each read once, old keys moved as it was read
    import_modules([m for m in module_entries(values.get("modules", [])) if m not in imported])
    config = typed_config(values)
    if config.run.run_dir is None:
        name = _run_name(str(base.get("experiment", experiment)), base, config.env)
        stem = Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
        n = 1  # runs launched in the same second each get their own directory (srl.launch.rundir)
        while Path(f"{stem}-{n}" if n > 1 else stem).exists():
            n += 1
        config.run.run_dir = f"{stem}-{n}" if n > 1 else str(stem)
    return config


def _experiment_values(experiment: str, imported: list[str]) -> dict[str, Any]:
    """The config values of a registered experiment, or of an experiment file (srl.config.files,
    which adds the modules it imports to `imported`)."""
    if is_experiment_file(experiment):
        return load_experiment_file(Path(experiment), imported=imported)
    try:
        return {**experiment_values(experiment), "experiment": experiment}
    except registry.UnknownNameError as e:
        raise ConfigError(str(e)) from None


def _run_name(experiment: str, base: dict[str, Any], env: str) -> str:
    """The experiment's name, and the env's where an override changed it (cartpole-ppo-Acrobot-v1)."""
    if env == base.get("env", ExperimentConfig.model_fields["env"].default):
        return experiment
    return f"{experiment}-{re.sub(r'[^A-Za-z0-9._-]+', '-', env).strip('-.')}"  # ALE/Pong-v5 -> ALE-Pong-v5
