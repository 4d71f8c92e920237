"""The Ray launcher: each worker is a Ray actor holding the resources its role asks for; the
controller (reports, restarts, stop rules: srl.launch.supervise) stays in this driver process.

Without `ray_address` a local Ray instance is started for the run (and stopped after it); with
one, the run joins that cluster. The user's own files named in `modules=` reach the workers of a
local instance from where this process found them (its PYTHONPATH and current directory), and a
cluster's workers uploaded with the job (runtime_env py_modules: the nodes have srl installed,
not the user's files). Ray places the workers and tells the controller when one dies (its `run`
call fails); the controller restarts it as a new actor, exactly as the local launcher restarts a
process, so Ray's own actor restarts stay off.

With dataflow.transport=shm a worker on the controller's host uses shared memory and ipc sockets, as with
the local launcher, whatever Ray node it belongs to (several nodes may share a host); a worker
placed on another host fails at start with an error saying so. With dataflow.transport=tcp workers may run
on any node: every actor is created first, Ray says which node each landed on, each stream gets
a free port on the node of the worker that binds it (its owner in srl.graph), and
the resulting addresses, with the run's secret, travel to the workers as task arguments (no
shared filesystem; the secret is never written to disk).

A request Ray can never or not now grant ends the run with a message instead of an endless wait
(srl.launch.ray_placement).
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from srl.config import ExperimentConfig, import_modules
from srl.graph import Graph, WorkerSpec, with_param_relays
from srl.launch.local import run_workers
from srl.launch.monitor import RunMonitor
from srl.launch.outputs import RunOutputs
from srl.launch.ray_placement import (
    Placement,
    await_placement,
    check_fits,
    newest_first,
    report_unplaced,
    resources_of,
)
from srl.streams.control import Role


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RuntimeError("launch.launcher=ray needs Ray: pip install 'srl[ray]' (or 'ray>=2.9')") from None
    return ray


def actor_options(config: ExperimentConfig, role: Role, node_id: str | None = None, soft: bool = True) -> dict[str, Any]:
    """`node_id`: a parameter relay's, the node of the subscribers it serves. Hard at the start (soft,
    Ray was seen to put both relays of a run on the service's node, beside busy ones); soft for a
    restart: a relay whose node is gone runs elsewhere, its subscribers restarted direct
    (srl.launch.supervise)."""
    r = resources_of(config, role)
    options: dict[str, Any] = {"num_cpus": r.num_cpus, "num_gpus": r.num_gpus, "max_restarts": 0}
    if node_id is not None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id, soft=soft)
    if r.resources:
        options["resources"] = dict(r.resources)
    if r.memory:
        options["memory"] = r.memory
    return options


def _untracked_shared_memory() -> None:
    """The controller owns the shared blocks. A Ray worker is not its child, so attaching would
    register each block with this process's own resource tracker, which unlinks them all when the
    worker dies (a kill, a crash): its restarted successor would find nothing to attach to."""
    from multiprocessing import resource_tracker

    register = resource_tracker.register
    resource_tracker.register = lambda name, rtype: None if rtype == "shared_memory" else register(name, rtype)


def _set_title(title: str) -> None:
    """Ray titles its workers through its own copy of setproctitle, which wins over the module's."""
    try:
        from ray._raylet import setproctitle  # type: ignore[attr-defined]  # ray's own copy, not in its stubs
    except ImportError:
        from setproctitle import setproctitle
    setproctitle(title)


class WorkerActor:
    """The Ray actor class (made remote in RayWorkers): one worker for its whole life."""

    def where(self) -> dict[str, str]:
        ray = _ray()
        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "host": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def free_ports(self, host: str, count: int) -> list[int]:
        """Ports free now on this actor's node (for the streams it will bind)."""
        from srl.streams.tcp_setup import free_ports

        return free_ports(host, count)

    def run(self, graph: Graph, spec: WorkerSpec, run_id: str, ipc_dir: Path, controller_host: str,
            wire: Any = None) -> None:  # fmt: skip
        """The worker's life (srl.launch.shell.serve, as a forked worker's), without os._exit;
        `wire` (transport=tcp) has every stream's address and the secret."""
        import torch

        import srl.builtins  # noqa: F401  (a Ray worker is a fresh process: register the built-ins)
        from srl.launch.ray_streams import node_wire
        from srl.launch.shell import open_transport, serve

        host = _ray().util.get_node_ip_address()
        if wire is None and host != controller_host:
            raise RuntimeError(
                f"worker {spec.name} was placed on host {host}, the controller runs on {controller_host}: "
                "streams between hosts need dataflow.transport=tcp (shared memory and ipc reach only this host)"
            )
        import_modules(graph.config.modules)
        _untracked_shared_memory()
        _set_title(f"srl:{graph.config.experiment}:{spec.role.title}:{spec.index}")
        torch.set_num_threads(graph.config.threads_for(trains=spec.role.trains))
        serve(graph, spec, open_transport(graph, run_id, ipc_dir, None if wire is None else node_wire(wire, host)))


class RayWorkers:
    """Each worker a Ray actor (the `Workers` of the supervisor)."""

    def __init__(self, graph: Graph, run_id: str, ipc_dir: Path, wire: Any = None) -> None:
        self.ray = _ray()
        self.run_id, self.ipc_dir = run_id, ipc_dir
        self.host = self.ray.util.get_node_ip_address()
        self._remote = self.ray.remote(WorkerActor)
        self.actors: dict[str, Any] = {}
        self.runs: dict[str, Any] = {}  # worker -> reference to its run() call
        self.details: dict[str, str] = {}
        self.placement: dict[str, Placement] = {}  # worker -> where its (last) actor runs, once placed
        self.run_dir = Path(str(graph.config.run.run_dir))
        self.waiting: dict[str, Any] = {}  # worker -> its actor, created but not running yet
        self.relay_nodes: dict[str, str] = {}  # parameter relay -> the node it serves
        self.graph = graph  # with the parameter relays the placement calls for (srl.launch.relays)
        self.wire = None if wire is None else self._place_streams(graph, wire)

    def _new_actor(self, graph: Graph, spec: WorkerSpec, first: bool = False) -> Any:
        options = actor_options(graph.config, spec.role, self.relay_nodes.get(spec.name), soft=not first)
        actor = self._remote.options(**options).remote()
        self.actors[spec.name] = actor
        self.placement[spec.name] = Placement(
            self.ray, actor.where.remote(), resources_of(graph.config, spec.role),
            f"ray_resources.{spec.role.title}", graph.config.launch.ray_placement_timeout_s,
        )  # fmt: skip
        return actor

    def _place_streams(self, graph: Graph, wire: Any) -> Any:
        """dataflow.transport=tcp: every worker's actor first, then each stream a port on its owner's node."""
        from srl.launch.ray_streams import place_streams, where_each

        for spec in graph.workers:
            self.waiting[spec.name] = self._new_actor(graph, spec)
        try:
            await_placement(self.ray, self.placement)  # place_streams asks each actor where it is
            where = where_each(self.ray, self.waiting)
            graph, wire = self._add_relays(graph, wire, where)
            return place_streams(self.ray, graph, self.waiting, self.host, wire, where)
        except BaseException:
            self.close()  # the launcher has no handle on these workers yet
            raise

    def _add_relays(self, graph: Graph, wire: Any, where: dict[str, dict[str, Any]]) -> tuple[Graph, Any]:
        """A parameter relay on each node that srl.launch.relays calls for, placed there (`where`
        gains theirs): the graph and wire the run goes on with."""
        from srl.launch.ray_streams import where_each
        from srl.launch.relays import relay_groups
        from srl.streams.tcp_setup import with_streams_of

        groups = relay_groups(graph, {name: w["node_id"] for name, w in where.items()})
        if not groups:
            return graph, wire
        relayed = with_param_relays(graph, [group for _, group in groups])
        relays = [spec for spec in relayed.workers if spec.role == Role.RELAY]
        for spec, (node_id, _) in zip(relays, groups):
            self.relay_nodes[spec.name] = node_id
            self.waiting[spec.name] = self._new_actor(relayed, spec, first=True)
        await_placement(self.ray, self.placement)
        where.update(where_each(self.ray, {spec.name: self.waiting[spec.name] for spec in relays}))
        self.graph = relayed
        return relayed, with_streams_of(wire, relayed)

    def unplaced(self) -> list[str]:
        """Workers Ray has not placed yet, within ray_placement_timeout_s (their heartbeat clocks
        wait); WorkerFailed for one whose request stayed unmet longer."""
        return [name for name, p in newest_first(self.placement) if p.watch(name)]

    def start(self, spec: WorkerSpec, graph: Graph) -> None:
        actor = self.waiting.pop(spec.name, None)
        if actor is None:  # a restart, or transport=shm: a new actor
            actor = self._new_actor(graph, spec)
        self.runs[spec.name] = actor.run.remote(graph, spec, self.run_id, self.ipc_dir, self.host, self.wire)
        self.details.pop(spec.name, None)

    def ended(self) -> dict[str, int]:
        """One ray.wait over every worker's run (one each, every 50 ms, cost the controller a
        Ray call per worker per loop)."""
        names = {ref: name for name, ref in self.runs.items()}
        if not names:
            return {}
        ready, _ = self.ray.wait(list(names), num_returns=len(names), timeout=0)
        return {names[ref]: self._exit_code(names[ref], ref) for ref in ready}

    def _exit_code(self, name: str, ref: Any) -> int:
        try:
            self.ray.get(ref)
            return 0
        except self.ray.exceptions.RayActorError as e:  # the process died (killed, out of memory)
            self.details[name] = f"its Ray actor died: {e}"
            return -9
        except Exception as e:  # it raised; its traceback normally came as an error report
            self.details[name] = str(e)
            return 1

    def detail(self, name: str) -> str | None:
        return self.details.get(name)

    def kill(self, name: str) -> None:
        self.ray.kill(self.actors[name], no_restart=True)
        try:
            self.ray.get(self.runs[name], timeout=10)
        except Exception:
            pass  # killed is what we wanted

    def running(self) -> bool:
        return len(self.ended()) < len(self.runs)

    def close(self, terminate_first: bool = False) -> None:
        if self.actors:  # once: a second close would find every actor killed
            self._write_placement()
            report_unplaced(self.placement)
        for name in list(self.actors):
            self.ray.kill(self.actors[name], no_restart=True)
        if self.runs:
            self.ray.wait(list(self.runs.values()), num_returns=len(self.runs), timeout=10)
        self.actors.clear()

    def _write_placement(self) -> None:
        """run_dir/placement.json: the Ray node and host of each worker's last actor."""
        where = {name: p.where() for name, p in self.placement.items()}
        if where:
            (self.run_dir / "placement.json").write_text(json.dumps(where, indent=2, sort_keys=True) + "\n")


def _connect(graph: Graph) -> bool:
    """Join the configured cluster, or start a local instance; True if this run must shut it down."""
    ray, config = _ray(), graph.config
    if ray.is_initialized():
        return False
    if config.launch.ray_address:
        shipped = _user_modules(config)  # the nodes have srl installed, not these: Ray uploads them
        ray.init(address=config.launch.ray_address, runtime_env={"py_modules": shipped} if shipped else None)
        return True
    start_local_ray(max(os.cpu_count() or 1, math.ceil(cpus_of(config, graph))))  # like local processes: may oversubscribe
    return True


def cpus_of(config: ExperimentConfig, graph: Graph) -> float:
    """The CPUs a run's workers ask Ray for."""
    return sum(resources_of(config, spec.role).num_cpus for spec in graph.workers)


def start_local_ray(num_cpus: int) -> None:
    """A new Ray instance on this machine, whose workers import srl and the user's modules from
    where this process does (Ray also puts this process's current directory on their sys.path)."""
    import srl

    inherited = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    paths = [str(Path(srl.__file__).resolve().parent.parent), *inherited]
    _ray().init(
        address="local",  # a new instance even where `ray start` left one running (Ray would join it)
        num_cpus=num_cpus,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}},
    )


def _user_modules(config: ExperimentConfig) -> list[ModuleType]:
    """The top-level modules of `modules=` that are the user's own files (found in the current
    directory or on PYTHONPATH), not installed packages: a cluster's worker, in another directory
    or on another host, would not find them."""
    import_modules(config.modules)
    out: list[ModuleType] = []
    for name in config.modules:
        top = sys.modules[name.partition(":")[0].split(".")[0]]  # module:function names its module first
        file = getattr(top, "__file__", None)
        installed = file is None or {"site-packages", "dist-packages"} & set(Path(file).parts)
        if top.__name__ != "srl" and not installed and top not in out:
            out.append(top)
    return out


def run_ray(graph: Graph, outputs: RunOutputs, monitor: RunMonitor) -> str:
    ray = _ray()
    started = _connect(graph)
    try:
        check_fits(graph, ray)  # before any worker starts
        return run_workers(graph, outputs, monitor, RayWorkers)
    finally:
        if started:
            ray.shutdown()
