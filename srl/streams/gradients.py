"""Gradient stream: several trainers of one policy as a torch.distributed group.

    trainer t: backward() --each parameter's gradient--> all-reduce (sum / N) --> clip, optimizer step

Every trainer holds the same parameters and optimizer state (rank 0's are broadcast when the group
forms) and averages every gradient over the group as soon as backward has accumulated it, so the
algorithm's own clipping and optimizer step see the group's mean gradient and every trainer takes
the same step: the parameters stay identical with no algorithm knowing about the group.
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
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from srl.streams.rendezvous import RendezvousClient, RendezvousServer

SECRET_BYTES = 32
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
        for param in module.parameters():
            if param.requires_grad:
                self._hooks.append(param.register_post_accumulate_grad_hook(self._average))

    def _average(self, param: torch.Tensor) -> None:
        # every trainer runs the same graph, so the hooks (and these collectives) fire in one order
        assert param.grad is not None
        dist.all_reduce(param.grad)
        param.grad.div_(self.world_size)

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
