"""Gradient stream: several trainers of one policy as a torch.distributed group.

    trainer t: backward() --gradients, a bucket at a time--> all-reduce (mean) --> clip, optimizer step

Every trainer holds the same parameters and optimizer state (rank 0's are broadcast when the group
forms) and averages every gradient over the group during backward, so the algorithm's own clipping
and optimizer step see the group's mean gradient and every trainer takes the same step: the
parameters stay identical with no algorithm knowing about the group.

Gradients travel in buckets, as DDP's do: the parameters, in reverse order (backward reaches the
last layers first), are cut into buckets of about BUCKET_BYTES; once every gradient of a bucket is
accumulated, the bucket is flattened into one tensor and all-reduced in one collective, then copied
back. The mean is the reduce's own (ReduceOp.AVG) where the backend has it (NCCL); gloo has none:
a sum, then a division. A bucket that backward leaves partly filled (a parameter no loss term
reached) is reduced at the end of backward (a callback queued on autograd's engine), with the
gradients it has: every trainer runs the same graph, so every trainer reduces the same ones. The
actor-critic CNN of pong-ppo (12 tensors, 1.7M parameters, 6.4 MiB) is one bucket: one collective
per backward pass instead of 12.
For equal-sized shares, the mean of the trainers' mean-loss gradients is the gradient of the mean
loss over the union of their batches.

Stopping: a trainer told to stop may leave while another waits in a collective for it. So every
update starts with a one-integer vote (`proceed`); a leaving trainer votes once to stop
(`leave`), and once any vote says stop, no member runs another collective: every trainer
reaches its final report.

The rendezvous is a key-value store served by the controller (`TrainerGroupStore`,
srl.streams.rendezvous): bound to the run's `bind_host` only, every request and reply signed with
a secret the launcher makes for the run and sealed against replay, its listening socket held by no
worker. Trainers join it through `RendezvousClient`, a `torch.distributed.Store`, under a prefix of
their epoch, so a group restarted together (srl.launch.supervise) meets in a fresh namespace of
the same store.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from srl.streams.rendezvous import RendezvousClient, RendezvousServer

SECRET_BYTES = 32
BUCKET_BYTES = 25 * 2**20  # DDP's default bucket_cap_mb: few collectives, yet overlapping the backward pass
GRADIENTS = "gradients"  # the stream srl.graph declares for the group (not a Transport stream)

@dataclass(frozen=True)
class GroupAddress:
    """Where the controller's store listens, how many trainers meet there, and the secret that
    signs their requests (handed to trainers as the tcp streams' secret is: never logged or written)."""

    host: str
    port: int
    world_size: int
    secret: bytes = field(repr=False)


class TrainerGroupStore(RendezvousServer):
    """The controller's side: serves the store for the run's whole life (port chosen by the OS),
    listening on `bind_host` (default `host`, what trainers connect to), under a fresh secret."""

    def __init__(self, host: str, world_size: int, bind_host: str | None = None) -> None:
        super().__init__(bind_host or host, secrets.token_bytes(SECRET_BYTES), world_size)
        self.address = GroupAddress(host, self.port, world_size, self.secret)


def bucket_params(params: Sequence[torch.Tensor], bucket_bytes: int) -> list[list[torch.Tensor]]:
    """`params` in reverse order (as backward reaches them) cut into buckets of about `bucket_bytes`,
    each of one dtype and device (a flat tensor holds one)."""
    buckets: list[list[torch.Tensor]] = []
    size = 0
    for param in reversed(params):
        current = buckets[-1] if buckets else None
        fits = current is not None and size + param.nbytes <= bucket_bytes
        if not (fits and current and current[0].dtype == param.dtype and current[0].device == param.device):
            buckets.append([])
            size = 0
        buckets[-1].append(param)
        size += param.nbytes
    return buckets


class GradientBuckets:
    """Averages gradients over the group a bucket at a time (see the module's docstring)."""

    def __init__(self, params: Sequence[torch.Tensor], world_size: int, has_avg: bool,
                 bucket_bytes: int = BUCKET_BYTES) -> None:  # fmt: skip
        self.world_size, self.has_avg = world_size, has_avg
        self.buckets = bucket_params(params, bucket_bytes)
        self._place = {id(p): (b, i) for b, bucket in enumerate(self.buckets) for i, p in enumerate(bucket)}
        self._ready: list[list[torch.Tensor]] = [[] for _ in self.buckets]
        self._flush_queued = False

    def ready(self, param: torch.Tensor) -> None:
        """A gradient accumulated (its post-accumulate hook): reduce its bucket once it is full.
        Every trainer runs the same graph, so the hooks, and these collectives, come in one order."""
        if not self._flush_queued:  # the first of this backward pass: reduce what is left at its end
            torch.autograd.Variable._execution_engine.queue_callback(self._flush)
            self._flush_queued = True
        b, _ = self._place[id(param)]
        self._ready[b].append(param)
        if len(self._ready[b]) == len(self.buckets[b]):
            self._reduce(b)

    def _flush(self) -> None:
        self._flush_queued = False
        for b, ready in enumerate(self._ready):
            if ready:
                self._reduce(b)

    def _reduce(self, b: int) -> None:
        params = sorted(self._ready[b], key=lambda p: self._place[id(p)])  # one order on every trainer
        self._ready[b] = []
        grads = [p.grad for p in params]
        assert all(g is not None for g in grads)
        flat = torch.cat([g.reshape(-1) for g in grads])  # type: ignore[union-attr]
        if self.has_avg:
            dist.all_reduce(flat, op=dist.ReduceOp.AVG)
        else:
            dist.all_reduce(flat)
            flat.div_(self.world_size)
        offset = 0
        for grad in grads:
            assert grad is not None
            grad.copy_(flat[offset:offset + grad.numel()].view_as(grad))
            offset += grad.numel()


class GradientGroup:
    """One trainer's membership: joins the group, averages gradients, keeps parameters equal."""

    def __init__(self, address: GroupAddress, rank: int, generation: int, device: torch.device,
                 timeout_s: float) -> None:  # fmt: skip
        if dist.is_initialized():
            raise RuntimeError("this process already belongs to a torch.distributed group")
        self.rank, self.world_size, self.device = rank, address.world_size, device
        if device.type == "cuda":
            torch.cuda.set_device(device)  # NCCL binds a process's collectives to its current device
        self._client = RendezvousClient(address.host, address.port, address.secret, timeout_s)
        store = dist.PrefixStore(f"generation-{generation}", self._client)
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, store=store, rank=rank, world_size=self.world_size,
                                timeout=datetime.timedelta(seconds=timeout_s))  # fmt: skip
        self._hooks: list = []
        self._buckets: GradientBuckets | None = None
        self.stopped = False  # a member voted to stop: no more collectives

    @property
    def leader(self) -> bool:
        """Rank 0 publishes parameters and writes checkpoints for the group."""
        return self.rank == 0

    def attach(self, module: torch.nn.Module) -> None:
        """Make every gradient `module` accumulates the group's mean, and start from rank 0's weights."""
        with torch.no_grad():
            for tensor in module.state_dict().values():
                dist.broadcast(tensor, src=0)
        params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = GradientBuckets(params, self.world_size, dist.get_backend() == "nccl", BUCKET_BYTES)
        for param in params:
            self._hooks.append(param.register_post_accumulate_grad_hook(self._buckets.ready))

    def proceed(self) -> bool:
        """Before an update: True if every member takes it (none is leaving)."""
        return not self.stopped and not self._vote(stop=False)

    def leave(self) -> None:
        """Vote to stop, unless the group already stopped; the members' last collective."""
        if not self.stopped:
            self._vote(stop=True)

    def gather(self, values: list[float], capacity: int) -> list[float]:
        """Every member's `values` (at most `capacity` each), rank by rank: the same list on every
        member (a deterministic group's stop rule pools the episodes each trainer saw)."""
        if len(values) > capacity:
            raise ValueError(f"{len(values)} values for a capacity of {capacity}")
        mine = torch.zeros(capacity + 1, dtype=torch.float64, device=self.device)
        mine[0] = len(values)  # a fixed shape for the collective: the count, then the values
        mine[1:len(values) + 1] = torch.tensor(values, dtype=torch.float64)
        every = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(every, mine)
        return [v for row in every for v in row[1:int(row[0].item()) + 1].tolist()]

    def _vote(self, stop: bool) -> bool:
        flag = torch.tensor([int(stop)], device=self.device)  # NCCL reduces only CUDA tensors
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        self.stopped = bool(flag.item())
        return self.stopped

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        if dist.is_initialized():
            dist.destroy_process_group()
        self._client.close()
