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


def place_streams(ray: Any, graph: Graph, actors: dict[str, Any], controller_ip: str, wire: Wire) -> Wire:
    """`wire` with every stream's port on its owner's node. `actors`: worker name -> its Ray actor
    (a srl.launch.ray_launcher.WorkerActor), created but not yet running."""
    names = list(actors)
    node_ip = dict(zip(names, (w["host"] for w in ray.get([actors[n].where.remote() for n in names]))))
    node_ip[CONTROLLER] = controller_ip
    owners = {s.name: s.owner for s in graph.streams if s.via == "transport"}
    ports: dict[str, int] = {}
    for owner in dict.fromkeys(owners.values()):
        mine = [name for name, o in owners.items() if o == owner]
        host = bind_host_on(node_ip[owner], wire.bind_host)
        if owner == CONTROLLER:
            found = free_ports(host, len(mine))
        else:
            found = ray.get(actors[owner].free_ports.remote(host, len(mine)))
        ports.update(zip(mine, found))
    hosts = {name: node_ip[owner] for name, owner in owners.items()}
    return dataclasses.replace(wire, ports=ports, hosts=hosts, bind_host=bind_host_on(controller_ip, wire.bind_host))
