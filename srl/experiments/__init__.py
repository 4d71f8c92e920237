"""Built-in experiments, by family: each a function returning its config values (overrides go on
top), registered by name. `srl list` lists them; `srl show NAME` prints the config one runs with."""

from typing import Any

from srl.api import registry
from srl.config import ExperimentConfig, translate_moved
from srl.experiments import atari, classic, continuous, goals, minigrid, multiagent, pods, recurrent, tuned  # noqa: F401


def experiment_values(name: str) -> dict[str, Any]:
    """A registered experiment's values: an ExperimentConfig's differences from the defaults (the
    built-ins), or a dict, its old flat keys moved (MOVED)."""
    made = registry.experiments.get(name)()
    return made.model_dump(exclude_defaults=True) if isinstance(made, ExperimentConfig) else translate_moved(made)
