"""Where the parameter relays go (dataflow.param_relay): the launchers' one rule, given where each
worker runs (the local launcher: one host; Ray: each worker's node, once placed).

- `off`: none; every subscriber takes its parameters from the service.
- `per_host`: one relay on every host that has subscribers (locally: one, for all of them), the
  service's own host included.
- `auto` (the default): `per_host` where the run spans more than one host, for the hosts other
  than the service's that hold at least RELAY_MIN_SUBSCRIBERS subscribers; none on one host. On the
  service's host a relay saves no link (its copies never leave the host), and for one subscriber
  it saves nothing and adds a hop.

The service then sends each version once per relay (plus once per subscriber left direct), not
once per subscriber: benchmarks/param_fanout.py, docs/scaling.md "Parameter fan-out".
"""

from __future__ import annotations

from collections.abc import Mapping

from srl.graph import Graph, param_subscribers
from srl.streams.params import SERVICE

RELAY_MIN_SUBSCRIBERS = 2  # auto: fewer on a host, and its relay would save nothing


def relay_groups(graph: Graph, host_of: Mapping[str, str]) -> list[tuple[str, tuple[str, ...]]]:
    """(host, its subscribers) for each relay to start, in the order of the graph's subscribers.
    `host_of`: worker name -> the host (or node) it runs on, for every worker of `graph`."""
    mode, subscribers = graph.config.dataflow.param_relay, param_subscribers(graph)
    if mode == "off" or not subscribers or SERVICE not in host_of:  # several policies: no service of the run's own
        return []
    by_host: dict[str, list[str]] = {}
    for worker in subscribers:
        by_host.setdefault(host_of[worker], []).append(worker)
    if mode == "per_host":
        return [(host, tuple(group)) for host, group in by_host.items()]
    if len(set(host_of.values())) < 2:
        return []
    return [(host, tuple(group)) for host, group in by_host.items()
            if host != host_of[SERVICE] and len(group) >= RELAY_MIN_SUBSCRIBERS]  # fmt: skip
