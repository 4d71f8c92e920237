"""transport=tcp under Ray: where each stream listens, found through Ray (no shared filesystem).

Each stream is bound by one worker (srl.streams.tcp_setup.stream_owners) or the controller. Once
every worker's Ray actor exists, each is asked where it landed and for free ports on its node; the
result is the run's `Wire` — ports, the host to reach each stream at, the secret — which the
launcher hands to every worker as a task argument.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from srl.streams.tcp import WILDCARDS, TcpTransport, Wire
from srl.streams.tcp_setup import CONTROLLER, free_ports, stream_owners


def bind_host_on(node_ip: str, configured: str) -> str:
    """Where a listener on `node_ip` binds: every interface if the config says so, else the node's
    IP (a loopback default would be unreachable from the other nodes)."""
    return configured if configured in WILDCARDS else node_ip


def tcp_transport(wire: Wire, node_ip: str, restarted_ns: int = 0) -> TcpTransport:
    """A worker's transport: its own streams listen on its node (see srl.graph.Graph.restarted_ns)."""
    return TcpTransport(dataclasses.replace(wire, bind_host=bind_host_on(node_ip, wire.bind_host)), restarted_ns)


def place_streams(ray: Any, config: Any, actors: dict[str, Any], controller_ip: str, wire: Wire) -> Wire:
    """`wire` with every stream's port on its owner's node. `actors`: worker name -> its Ray actor
    (a srl.launch.ray_launcher.WorkerActor), created but not yet running."""
    names = list(actors)
    node_ip = dict(zip(names, (w["host"] for w in ray.get([actors[n].where.remote() for n in names]))))
    node_ip[CONTROLLER] = controller_ip
    # a stream whose owner is not in this run (requests with inline inference) is bound by no one
    owners = {name: owner for name, owner in stream_owners(config).items() if owner in node_ip}
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
