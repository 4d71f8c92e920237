"""The run's dataflow, in one package: from a checked config to the workers and streams a run starts.

- graph: `build_graph(config)`, the workers and streams of a run (the one place that turns a config
  into them), with every check that needs the env's spaces
- dataflow: what a graph is made of (WorkerSpec, StreamSpec), the control streams, extra workers
- default_policy: which policy acts (`policy: auto`), and why
- lanes: several policies in one run, one lane each
- sizing, machine: what the machine gives (actors and envs per core) and holds (CPUs, files, memory)
- draw: `srl graph --draw`
- build, build_replay, build_lanes, wiring: each worker's kernel made from the graph and wired to
  its streams, beside the graph they read rather than among the kernels (srl.workers), which hold no config

`from srl.graph import Graph, build_graph` re-exports srl.graph.graph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srl.graph.dataflow import CONTROLLER, Delivery, StreamSpec, WorkerSpec
    from srl.graph.graph import (
        Graph,
        Lane,
        actor_block,
        build_graph,
        check_streams,
        initial_policy,
        lane_of,
        lane_outputs,
        make_policy,
        param_subscribers,
        policy_name,
        space_spec,
        sub_arrays,
        with_param_relays,
    )

# Re-exported on first use (PEP 562), not at import: a module that the graph itself imports (the
# league's streams, srl.population) may import srl.graph.dataflow before srl.graph.graph exists.
_FROM_DATAFLOW = ("CONTROLLER", "Delivery", "StreamSpec", "WorkerSpec")


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'srl.graph' has no attribute {name!r}")
    return getattr(importlib.import_module("srl.graph.dataflow" if name in _FROM_DATAFLOW else "srl.graph.graph"), name)


__all__ = [
    "CONTROLLER", "Delivery", "Graph", "Lane", "StreamSpec", "WorkerSpec", "actor_block", "build_graph",
    "check_streams", "initial_policy", "lane_of", "lane_outputs", "make_policy", "param_subscribers", "policy_name",
    "space_spec", "sub_arrays", "with_param_relays",
]
