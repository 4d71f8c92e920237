"""Several trainers on GPUs (issue 35): gradients averaged a bucket at a time, one collective per
bucket (srl.streams.gradients), the mean the per-tensor one; and trainers that would share a GPU
refused before launch, with a mocked device count (srl.devices counts through NVML)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from srl import devices
from srl.config import ConfigError
from srl.config.load import load_config
from srl.streams import gradients
from srl.streams.gradients import GradientGroup, bucket_params
from srl.testing.trainer_group import run_trainer_group

BUCKET_BYTES = 100_000  # small buckets: the model below needs several


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    used = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 300), torch.nn.Tanh(),
                               torch.nn.Linear(300, 100), torch.nn.Tanh(), torch.nn.Linear(100, 4))
    return torch.nn.ModuleDict({"used": used, "unused": torch.nn.Linear(3, 3)})  # no loss term reaches `unused`


def _local_grads(model: torch.nn.Module, rank: int) -> None:
    torch.manual_seed(10 + rank)  # each trainer's own batch
    x = torch.randn(32, 8)
    model["used"](x).square().mean().backward()


def _trainer(rank: int, address) -> tuple[dict, list[int]]:
    gradients.BUCKET_BYTES = BUCKET_BYTES
    calls: list[int] = []
    all_reduce = dist.all_reduce

    def counted(tensor, *args, **kwargs):
        calls.append(tensor.numel())
        return all_reduce(tensor, *args, **kwargs)

    model = _model()
    group = GradientGroup(address, rank, generation=0, device=torch.device("cpu"), timeout_s=60)
    try:
        group.attach(model)
        dist.all_reduce = counted  # the backward's collectives only
        for _ in range(2):  # twice: a second backward pass reduces its buckets again
            model.zero_grad(set_to_none=True)
            _local_grads(model, rank)
        dist.all_reduce = all_reduce
        return {name: None if p.grad is None else p.grad.numpy().copy() for name, p in model.named_parameters()}, calls
    finally:
        dist.all_reduce = all_reduce
        group.close()


def test_bucketed_mean_equals_the_per_tensor_mean_in_one_collective_per_bucket():
    results = run_trainer_group(_trainer)

    local = []
    for rank in range(2):  # each trainer's gradients on its own, averaged tensor by tensor
        model = _model()
        _local_grads(model, rank)
        local.append({name: p.grad for name, p in model.named_parameters()})
    model = _model()
    buckets = bucket_params([p for p in model.parameters() if p.requires_grad], BUCKET_BYTES)
    used = {id(p) for p in model["used"].parameters()}
    reduced = [b for b in buckets if any(id(p) in used for p in b)]
    assert len(reduced) >= 3, "the test model spans several buckets"
    assert any(any(id(p) not in used for p in b) for b in reduced), "a bucket backward leaves partly filled"
    for rank in range(2):
        grads, calls = results[rank]
        assert len(calls) == 2 * len(reduced), f"one all-reduce per bucket and backward pass, got {calls}"
        for name, mean in ((n, (local[0][n] + local[1][n]) / 2) for n in local[0] if local[0][n] is not None):
            assert torch.allclose(torch.from_numpy(grads[name]), mean, atol=1e-6), name
        assert grads["unused.weight"] is None and grads["unused.bias"] is None
    assert all((results[0][0][n] == results[1][0][n]).all() for n in local[0] if local[0][n] is not None)


def test_buckets_follow_backward_order_and_hold_one_dtype():
    a, b, c = torch.zeros(10), torch.zeros(10, dtype=torch.float64), torch.zeros(10)
    d = torch.zeros(1000)
    def ids(buckets):
        return [[id(t) for t in bucket] for bucket in buckets]

    assert ids(bucket_params([a, b, c], 1 << 20)) == ids([[c], [b], [a]])  # reversed; a dtype change starts one
    assert ids(bucket_params([a, c, d], 4000)) == ids([[d], [c, a]])  # d fills one: then c and a
    assert ids(bucket_params([d, a, c], 4040)) == ids([[c, a], [d]])


def _two_trainers(*overrides: str):
    return load_config("cartpole-ppo", ["launch.num_trainers=2", "launch.num_actor_workers=2", *overrides])


def test_trainers_that_would_share_a_gpu_are_refused_before_launch(monkeypatch):
    monkeypatch.setattr(devices, "cuda_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"launch\.num_trainers.*share a GPU \(all 2 on cuda:0.*"
                       r"launch\.num_trainers <= 1 .*devices\.trainer=cpu"):
        _two_trainers("devices.trainer=cuda")
    with pytest.raises(ConfigError, match="share a GPU"):
        _two_trainers("devices.trainer=auto")
    monkeypatch.setattr(devices, "cuda_count", lambda: 2)
    assert _two_trainers("devices.trainer=cuda").devices.trainer == "cuda"  # trainer i on cuda:i
    with pytest.raises(ConfigError, match=r"all 2 on cuda:1"):
        _two_trainers("devices.trainer=cuda:1")
    with pytest.raises(ConfigError, match=r"3 trainers on 2 of them"):
        load_config("cartpole-ppo", ["launch.num_trainers=3", "launch.num_actor_workers=3", "devices.trainer=cuda"])
    # the CPU (gloo), and Ray (each trainer sees the GPUs Ray gave it) are not refused
    assert _two_trainers("devices.trainer=cpu").launch.num_trainers == 2
    assert _two_trainers("devices.trainer=cuda", "launch.launcher=ray", "dataflow.transport=tcp").launch.num_trainers == 2


NCCL_GROUP = """
import torch, torch.distributed as dist
from srl.streams.gradients import GradientGroup, TrainerGroupStore
store = TrainerGroupStore("127.0.0.1", world_size=1)
group = GradientGroup(store.address, 0, generation=0, device=torch.device("cuda", 0), timeout_s=60)
ops, all_reduce = [], dist.all_reduce
try:
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4)).cuda()
    group.attach(model)
    dist.all_reduce = lambda tensor, op=dist.ReduceOp.SUM, **kw: (ops.append(op), all_reduce(tensor, op=op, **kw))[1]
    model(torch.randn(16, 8, device="cuda")).square().mean().backward()
    dist.all_reduce = all_reduce
    assert ops == [dist.ReduceOp.AVG], ops  # one bucket, averaged by NCCL itself
    print("ok", dist.get_backend())
finally:
    dist.all_reduce = all_reduce
    group.close()
    store.close()
"""


@pytest.mark.gpu
def test_nccl_averages_a_bucket_with_its_own_avg():
    """Only NCCL has ReduceOp.AVG: seen on CUDA alone, in a process of its own (test_devices.run_alone)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", NCCL_GROUP], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "ok nccl" in done.stdout, done.stderr[-3000:]
