"""dataflow.transport=tcp under Ray: where each stream listens, found through Ray (no shared filesystem).

Each stream is bound by one worker or the controller (its owner in srl.graph). Once
every worker's Ray actor exists, each is asked where it landed and for free ports on its node; the
result is the run's `Wire` — ports, the host to reach each stream at, the secret — which the
launcher hands to every worker as a task argument.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from srl.graph import CONTROLLER, Graph
from srl.streams.tcp import WILDCARDS, Wire
from srl.streams.tcp_setup import free_ports


def bind_host_on(node_ip: str, configured: str) -> str:
    """Where a listener on `node_ip` binds: every interface if the config says so, else the node's
    IP (a loopback default would be unreachable from the other nodes)."""
    return configured if configured in WILDCARDS else node_ip


def node_wire(wire: Wire, node_ip: str) -> Wire:
    """A worker's wire: its own streams listen on its node."""
    return dataclasses.replace(wire, bind_host=bind_host_on(node_ip, wire.bind_host))


def where_each(ray: Any, actors: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Worker name -> where its actor runs (WorkerActor.where: node_id, host, pid), asked of all at once."""
    names = list(actors)
    return dict(zip(names, ray.get([actors[n].where.remote() for n in names])))


def place_streams(ray: Any, graph: Graph, actors: dict[str, Any], controller_ip: str, wire: Wire,
                  where: dict[str, dict[str, Any]] | None = None) -> Wire:  # fmt: skip
    """`wire` with every stream's port on its owner's node. `actors`: worker name -> its Ray actor
    (a srl.launch.ray_launcher.WorkerActor), created but not yet running; `where`: where_each's
    answer for them, if asked already."""
    where = where_each(ray, actors) if where is None else where
    node_ip = {name: w["host"] for name, w in where.items()}
    node_ip[CONTROLLER] = controller_ip
    owners = {s.name: s.owner for s in graph.streams if s.via == "transport"}
    streams_of: dict[str, list[str]] = {}  # owner -> the streams it binds (one pass: N owners, N streams)
    for name, owner in owners.items():
        streams_of.setdefault(owner, []).append(name)
    bind_hosts = {owner: bind_host_on(node_ip[owner], wire.bind_host) for owner in streams_of}
    # every worker's ports asked for at once, then one wait (asked in turn, a run of N workers
    # waited for N round trips to the nodes)
    asked = {owner: actors[owner].free_ports.remote(bind_hosts[owner], len(mine))
             for owner, mine in streams_of.items() if owner != CONTROLLER}
    found = dict(zip(asked, ray.get(list(asked.values()))))
    if CONTROLLER in streams_of:
        found[CONTROLLER] = free_ports(bind_hosts[CONTROLLER], len(streams_of[CONTROLLER]))
    ports = {name: port for owner, mine in streams_of.items() for name, port in zip(mine, found[owner])}
    hosts = {name: node_ip[owner] for name, owner in owners.items()}
    return dataclasses.replace(wire, ports=ports, hosts=hosts, bind_host=bind_host_on(controller_ip, wire.bind_host))
