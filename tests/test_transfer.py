"""Host memory for what a worker moves between the CPU and a GPU (srl.transfer): the on-policy
trainer's batch pinned where its policy is on a GPU, published weights through reused host
buffers with one wait per version. On the CPU the staging is taken without pinning (`pin=False`),
its waits counted and its frames held against the CPU's own; on a GPU (tests marked gpu) the
trainer's batch and the published weights are held against the CPU's."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from srl import transfer
from srl.config.load import load_config
from srl.graph import build_graph
from srl.graph.build import make_kernel
from srl.graph.dataflow import WorkerSpec
from srl.streams.control import Role
from srl.streams.inline import InlineTransport
from srl.streams.params import SERVICE_IN, ParamPublisher, state_frames

CPU = torch.device("cpu")


class CountingStaging(transfer.Staging):
    """The staging a GPU gets, taken on the CPU (no pinning), counting its waits."""

    def __init__(self) -> None:
        super().__init__(CPU, pin=False)
        self.waits = 0

    def wait(self) -> None:
        self.waits += 1
        super().wait()


# ------------------------------------------------------------------------------ staging


def test_there_is_no_staging_on_the_cpu():
    assert transfer.for_device(CPU) is None  # callers keep their zero-copy path
    assert not transfer.host_zeros((2, 3), np.float32, CPU).is_pinned()


def test_outputs_come_back_into_reused_buffers():
    staging = transfer.Staging(CPU, pin=False)
    out = staging.to_host("value", torch.arange(6.0).reshape(2, 3).t())  # a strided output
    assert np.array_equal(out, np.arange(6.0).reshape(2, 3).T)
    again = staging.to_host("value", torch.ones(4))
    assert again.ctypes.data == out.ctypes.data and again.tolist() == [1.0] * 4


# ------------------------------------------------------------------------------ published weights


def test_weights_through_the_staging_are_the_cpus_frames_after_one_wait():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    staging = CountingStaging()
    frames = state_frames(module, staging)
    assert [f.tobytes() for f in frames] == [f.tobytes() for f in state_frames(module)]
    assert staging.waits == 1
    with torch.no_grad():
        module[0].weight.add_(1.0)
    again = state_frames(module, staging)  # the next version, in the same buffers
    assert [f.ctypes.data for f in again] == [f.ctypes.data for f in frames] and staging.waits == 2
    assert again[0].tobytes() == state_frames(module)[0].tobytes()


def test_a_published_version_keeps_its_weights_when_the_staging_is_reused():
    """The frames of version 1 sit in the buffers that version 2 is copied into: the sender must
    have copied them (every Sender does), or subscribers would load version 2's weights as 1's."""
    transport, module = InlineTransport(), torch.nn.Linear(3, 4)
    publisher = ParamPublisher(transport)
    publisher._staging, publisher._staging_known = CountingStaging(), True  # a GPU's path, on the CPU
    first = [f.copy() for f in state_frames(module)]
    publisher.publish(1, module)
    with torch.no_grad():
        module.weight.add_(1.0)
    publisher.publish(2, module)
    service_in = transport.receiver(SERVICE_IN).recv_all()
    assert [m.header[1] for m in service_in] == [1, 2]
    assert [bytes(f) for f in service_in[0].frames] == [f.tobytes() for f in first]
    assert [bytes(f) for f in service_in[1].frames] == [f.tobytes() for f in state_frames(module)]


# ------------------------------------------------------------------------------ on a GPU

needs_cuda = pytest.mark.gpu


@needs_cuda
def test_weights_on_cuda_are_published_as_the_cpus_through_reused_pinned_buffers():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    expected = [f.copy() for f in state_frames(module)]
    staging = transfer.Staging(torch.device("cuda"))
    frames = state_frames(module.to("cuda"), staging)
    assert [f.tobytes() for f in frames] == [e.tobytes() for e in expected]
    again = state_frames(module, staging)
    assert [f.ctypes.data for f in again] == [f.ctypes.data for f in frames]
    assert all(b.is_pinned() for b in staging._buffers.values())


@needs_cuda
def test_an_on_policy_trainer_on_cuda_gathers_segments_into_pinned_memory(tmp_path):
    config = load_config("cartpole-ppo", [f"run.run_dir={tmp_path}", "launch.launcher=inline", "devices.trainer=cuda"])
    kernel = make_kernel(build_graph(config), WorkerSpec(Role.TRAINER, 0), InlineTransport())
    assert kernel.device.type == "cuda"
    assert all(t.is_pinned() for t in kernel.tensors.values())
    assert all(a.ctypes.data == t.data_ptr() for a, t in zip(kernel.batch.values(), kernel.tensors.values()))
