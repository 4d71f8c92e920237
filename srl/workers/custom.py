"""The kernel of a worker of the user's own kind (srl.api.worker), given the endpoints of the
streams the graph declares for it (srl.graph.dataflow.custom_streams)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from srl.api import registry
from srl.graph.dataflow import SAMPLES, USER_PREFIX, WorkerSpec
from srl.streams.samples import SampleTap
from srl.streams.transport import Transport


def make_custom(graph: Any, spec: WorkerSpec, transport: Transport) -> Any:
    inputs: dict[str, Any] = {}
    outputs = {}
    taps = [s.name for s in graph.of_kind("tap") if spec.name in s.consumers]
    if taps:
        prefix = "sample.0.0."  # one segment slot's arrays (srl.graph.Graph.actor_layout)
        arrays = {n[len(prefix):]: a for n, a in graph.actor_layout().arrays.items() if n.startswith(prefix)}
        inputs[SAMPLES] = SampleTap(transport, taps, arrays)
    for s in graph.of_kind("user"):
        if spec.name in s.consumers:
            inputs[s.name.removeprefix(USER_PREFIX)] = transport.receiver(s.name)
        if spec.name in s.producers:
            outputs[s.name.removeprefix(USER_PREFIX)] = transport.sender(s.name)
    index = [w for w in graph.workers if w.kind == spec.kind].index(spec)
    kernel_cls = registry.workers.get(spec.kind).kernel_cls
    run_dir = Path(str(graph.config.run.run_dir))  # a policy's own (run_dir/policies/<name>) may not be there yet
    run_dir.mkdir(parents=True, exist_ok=True)
    return kernel_cls(inputs, outputs, run_dir, index)
