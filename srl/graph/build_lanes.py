"""An actor's part in each policy's lane (srl.graph.lanes, srl.workers.lanes): the lane's slots, its
inference (its policy worker, or inline) and its sample producer, on the lane's streams; and the
actor's own slots of every agent's rows, in its memory (the run's graph lays them out)."""

from __future__ import annotations

import numpy as np

from srl.api import registry
from srl.api.policy import Policy
from srl.graph import Graph, lane_outputs
from srl.graph.wiring import policy_ports, split_actor_arrays
from srl.monitor.timing import TimeBreakdown
from srl.spaces import obs_fields
from srl.streams.inference import Slot
from srl.streams.prefixed import PrefixedTransport
from srl.streams.samples import SampleProducer
from srl.streams.transport import Transport
from srl.workers.lanes import LanesPort, LanesProducer, lane_rows


def lanes_ports(graph: Graph, transport: Transport, actor: int, clock: TimeBreakdown
                ) -> tuple[LanesPort, LanesProducer, list[Slot]]:
    c = graph.config
    full_obs = {k: s.shape for k, s in obs_fields(graph.observation_space).items()}
    lanes, ports, lane_slots = [], [], []
    producers: list[SampleProducer | None] = []
    for lane in graph.lanes:
        lg, view = lane.at_run(graph), PrefixedTransport(transport, lane.prefix)
        port, producer, infer = policy_ports(lg, view, actor, clock)
        lane_obs = {k: s.shape for k, s in obs_fields(lg.observation_space).items()}
        factory = registry.policies.get(lg.config.policy)  # a league's tag: its opponent (srl.models.league_pool)
        tag = factory.episode_tag if isinstance(factory, type) and issubclass(factory, Policy) else None
        lanes.append(lane_rows(lane.name, lane.rows, len(graph.agents), c.dataflow.envs_per_split, full_obs, lane_obs,
                               tuple(lane_outputs(lg)), tag))
        ports.append(port)
        producers.append(producer)
        lane_slots.append(infer)
    arrays = {name: np.zeros(spec.shape, spec.dtype) for name, spec in graph.actor_layout().arrays.items()}
    infer, segments = split_actor_arrays(graph, arrays)
    return (LanesPort(lanes, ports, lane_slots, infer),
            LanesProducer(lanes, producers, segments, [len(lane.rows) for lane in graph.lanes]), infer)
