"""Sweeps with launch.launcher=ray: every trial's workers on one Ray cluster, as many trials at once as it
has CPUs for.

Without `ray_address` the sweep starts one local Ray instance for all its trials (stopped when the
sweep ends) and hands each trial its address; with one, the sweep reads that cluster's CPUs and its
trials join it. A trial stays an ordinary `srl run` in its own process: it is the driver of its own
Ray job, Ray places its workers on the cluster's nodes and the ray launcher supervises them, and
they end with it (Ray kills the actors a dead driver owned).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from srl.config import ExperimentConfig


@dataclass(frozen=True)
class Cluster:
    address: str  # what each trial's ray_address becomes
    parallel: int  # trials at once


@contextmanager
def trial_cluster(config: ExperimentConfig, parallel: int | None, trials: int) -> Iterator[Cluster]:
    """The cluster the trials of a launch.launcher=ray sweep run on, while the sweep runs. `parallel`:
    the sweep file's (None: as many as the cluster's CPUs hold, each trial asking for its
    workers'). A local instance gets this machine's CPUs, or more where `parallel` trials need
    them: like local processes, it may oversubscribe the cores."""
    from srl.devices import cpu_count
    from srl.graph import build_graph
    from srl.launch.ray_launcher import _ray, cpus_of, start_local_ray

    ray = _ray()
    per_trial = max(cpus_of(config, build_graph(config)), 1e-9)
    if config.launch.ray_address:
        ray.init(address=config.launch.ray_address)
        address = config.launch.ray_address
    else:
        start_local_ray(max(cpu_count(), math.ceil(per_trial * (parallel or 1))))
        address = ray.get_runtime_context().gcs_address
    try:
        fits = math.floor(float(ray.cluster_resources().get("CPU", 0.0)) / per_trial + 1e-9)
        yield Cluster(address, parallel or max(1, min(trials, fits)))
    finally:
        ray.shutdown()
