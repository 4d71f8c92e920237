"""Whether Ray can place the workers. Ray itself waits forever for resources it cannot grant, and
so would a run, silently; instead:

- a request no node could ever hold (a custom resource no node has, more CPUs or GPUs than any
  one node has) is refused before any worker starts (`check_fits`, a ConfigError);
- a worker whose request each node could hold, but which stays unmet because other workers hold
  what it needs, ends the run after `ray_placement_timeout_s` (`Placement.watch`).

Both messages name the worker, its request and the cluster's total and free resources. While a
worker waits for Ray within the timeout its heartbeat clock waits too; a run that stops sooner for
another reason (its target reached) ends with a note for each worker that never ran.

"Unmet" is Ray's own view: the requests its autoscaler lists as waiting for resources. A worker
whose resources were granted but whose process is slow to start (a busy machine) is not among
them, so it is left to the heartbeat timeout. Where that view cannot be read (an older Ray, a Ray
client connection) the free resources decide.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from srl.config import ConfigError, RayResources
from srl.graph import Graph
from srl.launch.outputs import WorkerFailed
from srl.streams.control import Role

UNMET_RECHECK_S = 1.0  # the autoscaler's view is asked at most this often per worker
GIB = 2**30
# they only forward weights; a relay is placed on its subscribers' node, whose CPUs they hold
DEFAULTS = {Role.PARAMS: RayResources(num_cpus=0), Role.RELAY: RayResources(num_cpus=0)}


def resources_of(config: Any, role: Role) -> RayResources:
    return config.launch.ray_resources.get(role.title) or DEFAULTS.get(role) or RayResources()


def request_of(r: RayResources) -> dict[str, float]:
    """What the worker asks Ray for, by Ray's resource names (zeros left out, as Ray does)."""
    ask = {"CPU": r.num_cpus, "GPU": r.num_gpus, "memory": r.memory or 0, **r.resources}
    return {name: float(amount) for name, amount in ask.items() if amount}


def describe_request(r: RayResources, field: str) -> str:
    memory = f"{r.memory / GIB:.3g} GiB" if r.memory else "none"
    custom = ", ".join(f"{name}: {amount:g}" for name, amount in r.resources.items())
    custom = f"{{{custom}}}" if custom else "none"
    return f"num_cpus={r.num_cpus:g}, num_gpus={r.num_gpus:g}, memory={memory}, custom resources {custom} ({field})"


def describe(resources: dict[str, float]) -> str:
    """'CPU 2, memory 16.3 GiB, node_b 1' (Ray's per-node and object-store entries left out)."""
    hidden = ("node:", "object_store_memory")
    shown = [(k, v) for k, v in sorted(resources.items()) if not k.startswith(hidden)]
    parts = [f"{k} {v / GIB:.3g} GiB" if k == "memory" else f"{k} {v:g}" for k, v in shown]
    return ", ".join(parts) or "nothing"


def cluster_summary(ray: Any) -> str:
    total = ray.cluster_resources()
    free = {name: 0.0 for name in total} | ray.available_resources()  # Ray leaves out what is all taken
    return f"the cluster has in total: {describe(total)}; free now: {describe(free)}"


def check_fits(graph: Graph, ray: Any) -> None:
    """Every worker's request fits on some live node (per-node totals from ray.nodes()); else
    Ray would wait forever: ConfigError before any worker starts."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    for spec in graph.workers:
        r = resources_of(graph.config, spec.role)
        ask = request_of(r)
        if not any(all(node.get(k, 0) >= v for k, v in ask.items()) for node in nodes):
            per_node = "; ".join(f"[{describe(node)}]" for node in nodes)
            raise ConfigError(
                f"worker {spec.name} asks Ray for {describe_request(r, f'ray_resources.{spec.role.title}')}, "
                f"which no node has (nodes: {per_node}); {cluster_summary(ray)}"
            )


def unmet(ray: Any, request: dict[str, float]) -> bool:
    """Whether Ray cannot grant `request` now."""
    pending = _pending_requests(ray)
    if pending is None:
        free = ray.available_resources()
        return any(free.get(name, 0.0) < amount for name, amount in request.items())
    return any(_same(request, p) for p in pending)


def _pending_requests(ray: Any) -> list[dict[str, float]] | None:
    """The requests Ray's autoscaler lists as waiting for resources (None: that view is unreadable)."""
    try:
        from ray.autoscaler.v2.sdk import get_cluster_status

        status = get_cluster_status(ray.get_runtime_context().gcs_address, timeout=5)
        demands = status.resource_demands.ray_task_actor_demand
        return [dict(r.bundle) for demand in demands for r in demand.bundles_by_count]
    except Exception:  # noqa: BLE001  (an older Ray, a client connection: fall back to free resources)
        return None


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    b = {k: v for k, v in b.items() if v}
    return set(a) == set(b) and all(math.isclose(a[k], b[k], rel_tol=1e-3) for k in a)


class Placement:
    """One worker's Ray actor until Ray has placed it: `ref` is its answer to `where()`."""

    def __init__(self, ray: Any, ref: Any, resources: RayResources, field: str, timeout_s: float) -> None:
        self.ray, self.ref, self.resources, self.field, self.timeout_s = ray, ref, resources, field, timeout_s
        self.since_s = time.monotonic()
        self.placed = False
        self.failed = False  # it ended the run
        self._unmet, self._asked_s = False, -math.inf

    def waiting(self) -> bool:
        """Ray has not started the actor yet (its where() has not answered)."""
        if not self.placed:
            self.placed = bool(self.ray.wait([self.ref], timeout=0)[0])
        return not self.placed

    def watch(self, worker: str) -> bool:
        """True while the worker waits for Ray within its time (its heartbeat clock should wait
        too); WorkerFailed once its request stayed unmet for ray_placement_timeout_s."""
        if not self.waiting():
            return False
        if time.monotonic() - self.since_s < self.timeout_s:
            return True
        if self._still_unmet():
            self.failed = True
            raise WorkerFailed(worker, self.message(f"within launch.ray_placement_timeout_s={self.timeout_s:g} s"))
        return False  # granted, its process still starting: the heartbeat timeout judges it from now

    def _still_unmet(self) -> bool:
        now = time.monotonic()
        if now - self._asked_s >= UNMET_RECHECK_S:
            self._unmet, self._asked_s = unmet(self.ray, request_of(self.resources)), now
        return self._unmet

    def message(self, when: str) -> str:
        return (
            f"Ray could not place it {when}: it asks for "
            f"{describe_request(self.resources, self.field)}; {cluster_summary(self.ray)} "
            "(other workers hold what it needs: ask for less, or add nodes)"
        )

    def where(self, timeout_s: float = 5.0) -> dict[str, Any]:
        """Where the actor runs, for placement.json. One that ended the run stays "not placed": the
        run's teardown frees what it waited for, and Ray may place it before this is asked."""
        if self.failed or self.waiting():
            return {"error": "not placed"}
        try:
            return self.ray.get(self.ref, timeout=timeout_s)
        except Exception as e:  # noqa: BLE001
            return {"error": type(e).__name__}


def newest_first(placements: dict[str, Placement]) -> list[tuple[str, Placement]]:
    """Ray grants equal requests roughly in order: of two alike, the later one is left waiting, so
    it is the one to name."""
    return sorted(placements.items(), key=lambda item: -item[1].since_s)


def report_unplaced(placements: dict[str, Placement]) -> None:
    """At the end of a run that stopped for another reason (a target reached before the timeout):
    a note for each worker whose request Ray never granted, so none goes unnoticed."""
    if any(p.failed for p in placements.values()):
        return  # the run's failure already said it
    for name, p in newest_first(placements):
        if p.waiting() and unmet(p.ray, request_of(p.resources)):
            print(f"srl: worker {name} never ran: {p.message('before the run ended')}", file=sys.stderr)


def await_placement(ray: Any, placements: dict[str, Placement], poll_s: float = 0.1) -> None:
    """Block until Ray has placed every actor (WorkerFailed for one whose request stays unmet)."""
    while True:
        waiting = [p for name, p in newest_first(placements) if p.watch(name) or p.waiting()]
        if not waiting:
            return
        ray.wait([p.ref for p in waiting], num_returns=len(waiting), timeout=poll_s)
