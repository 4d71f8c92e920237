"""Adam without torch.optim: the same update, and 1.5 s less start-up for every trainer.

`torch.optim.Adam(...)` imports torch._dynamo when constructed (1.5 s here, on the critical
path of every trainer and pod process). This class runs the kernels torch's own Adam runs — the
fused one where the build has it, else foreach ops — and is tested to give the same parameters.

The learning rate (`param_groups[0]["lr"]`) may be a float or a 0-dim tensor on the parameters'
device (a pod's schedule computed on the device, srl.workers.pod). Neither path reads a value
back to the host: the step counts stay device tensors and the foreach path computes its bias
corrections from them on the device, so a step can be captured in a CUDA graph. When the fused
kernel refuses this build or device, the optimizer says so once on the console and goes on with
the foreach path (issue 35: it used to fall back silently, to a path with a host sync per step).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import torch


class Adam:
    def __init__(self, params: Iterable[torch.Tensor], lr: float | torch.Tensor, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999)) -> None:
        self.params: list[torch.Tensor] = list(params)
        self.param_groups: list[dict[str, Any]] = [{"lr": lr}]  # the optimizer's one group; schedules set "lr"
        self.eps, self.betas = eps, betas
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]
        self.fused = hasattr(torch, "_fused_adam_")

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        lr, (beta1, beta2) = self.param_groups[0]["lr"], self.betas
        torch._foreach_add_(self.steps, 1.0)
        if self.fused:
            try:
                torch._fused_adam_(
                    self.params, grads, self.exp_avg, self.exp_avg_sq, [], self.steps, lr=lr, beta1=beta1,
                    beta2=beta2, weight_decay=0.0, eps=self.eps, amsgrad=False, maximize=False,
                )
                return
            except (RuntimeError, NotImplementedError, TypeError) as error:  # not for this device or build
                self.fused = False
                device = self.params[0].device if self.params else "?"
                print(f"srl: Adam leaves its fused kernel for foreach ops on {device} ({type(error).__name__}: "
                      f"{str(error).splitlines()[0][:160]}); said once", file=sys.stderr, flush=True)
        self._foreach_step(grads, lr, beta1, beta2)

    def _foreach_step(self, grads: list[torch.Tensor], lr: float | torch.Tensor, beta1: float, beta2: float) -> None:
        """The fused kernel's update in foreach ops, with the bias corrections computed on the
        device from the step count (no host read: graph-capturable)."""
        if not self.params:
            return
        step = self.steps[0]
        torch._foreach_lerp_(self.exp_avg, grads, 1 - beta1)
        torch._foreach_mul_(self.exp_avg_sq, beta2)
        torch._foreach_addcmul_(self.exp_avg_sq, grads, grads, 1 - beta2)
        denom = torch._foreach_sqrt(self.exp_avg_sq)
        torch._foreach_div_(denom, torch.sqrt(1 - torch.pow(beta2, step)))
        torch._foreach_add_(denom, self.eps)
        # params -= lr / (1 - beta1^step) * exp_avg / denom
        step_size = torch.as_tensor(lr, dtype=torch.float32, device=step.device) / (1 - torch.pow(beta1, step))
        torch._foreach_div_(denom, step_size)
        torch._foreach_sub_(self.params, torch._foreach_div(self.exp_avg, denom))

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.param_groups[0]["lr"], "state": {"exp_avg": self.exp_avg,
                "exp_avg_sq": self.exp_avg_sq, "step": self.steps}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        lr = self.param_groups[0]["lr"]
        if isinstance(lr, torch.Tensor):  # a device rate stays the tensor a captured graph reads
            lr.fill_(float(state["lr"]))
        else:  # (a pod's checkpoint holds its rate as a tensor)
            self.param_groups[0]["lr"] = float(state["lr"])
        for name, mine in (("exp_avg", self.exp_avg), ("exp_avg_sq", self.exp_avg_sq), ("step", self.steps)):
            for dst, src in zip(mine, state["state"][name]):
                dst.copy_(src)

