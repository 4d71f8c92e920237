"""The experiment config, in one package: what a config is and how it is read and checked.

- schema: the typed sections (ExperimentConfig and its parts), each field documented once
- overrides: old keys moved to their sections, `key=value` overrides, a saved config read back,
  a validation error as one line
- checks: `build_config`, every check across fields, before any process starts
- compat: whether a policy, an algorithm and an env's spaces fit together
- load: `load_config(experiment, overrides)`, what `srl run` is given -> the config a run uses
- files: experiment files (`srl run path/to/experiment.yaml`)
- doc: docs/config.md's tables, from the schema

Importing `srl.config` loads the schema and overrides alone (re-exported here), which imports nothing of srl
beyond the algorithm's base config: every module may import from it without an import circle.
checks, compat, load, files and doc import the rest of srl (experiments, the graph's policy
choice) and are imported by their own names (`from srl.config.load import load_config`).
"""

from srl.config.overrides import (
    MOVED,
    RESET,
    Replace,
    apply_overrides,
    drop_stale_settings,
    format_error,
    leaves,
    load_saved_config,
    models_in,
    moved_key,
    moved_leaf,
    owner,
    parse_overrides,
    refuse_moved_twice,
    translate_moved,
    unknown_fields,
)
from srl.config.schema import (
    GOAL_WRAPPER,
    RAY_ROLES,
    RUN_ID_PREFIX_ENV,
    ConfigError,
    DataflowConfig,
    DebugConfig,
    DeviceConfig,
    EnsembleConfig,
    EnvWrapper,
    EvalConfig,
    ExperimentConfig,
    ExtraWorker,
    HerConfig,
    LaunchConfig,
    LeagueSpec,
    MonitorConfig,
    PodConfig,
    PolicySpec,
    RayResources,
    ReplayConfig,
    RunConfig,
    Settings,
    StopConfig,
    import_modules,
    lock_step_batch_segments,
    module_entries,
    show_config,
    with_cwd_on_path,
)

__all__ = [
    "GOAL_WRAPPER", "MOVED", "RAY_ROLES", "RESET", "RUN_ID_PREFIX_ENV", "ConfigError", "DataflowConfig", "DebugConfig",
    "DeviceConfig", "EnsembleConfig",
    "EnvWrapper", "EvalConfig", "ExperimentConfig", "ExtraWorker", "HerConfig", "LaunchConfig", "LeagueSpec",
    "MonitorConfig", "PodConfig", "PolicySpec", "RayResources", "Replace", "ReplayConfig", "RunConfig", "Settings",
    "StopConfig", "apply_overrides", "drop_stale_settings", "format_error", "import_modules", "leaves",
    "load_saved_config", "lock_step_batch_segments", "module_entries", "models_in", "moved_key", "moved_leaf", "owner",
    "parse_overrides", "refuse_moved_twice", "show_config", "translate_moved", "unknown_fields", "with_cwd_on_path",
]
