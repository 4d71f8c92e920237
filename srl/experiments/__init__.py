"""Built-in experiments, by family: each a function returning its config values (overrides go on
top), registered by name. `srl list` lists them; `srl show NAME` prints the config one runs with."""

from srl.experiments import atari, classic, continuous, minigrid, multiagent, pods, recurrent, tuned  # noqa: F401
