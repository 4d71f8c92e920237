"""Where each role's networks run: the one place that turns the config's device names into torch devices.

`devices.<role>` in the config is `auto`, `cpu`, `cuda` or `cuda:N`. `auto` is the first CUDA device
where torch sees one, else the CPU. Under Ray a worker sees only the GPUs Ray assigned it
(CUDA_VISIBLE_DEVICES), so `cuda` there is its own GPU. The trainers of a group (num_trainers > 1)
take one GPU each, trainer i the i-th modulo the count, as NCCL needs one device per rank.

Counting devices goes through NVML (`torch.cuda.device_count`), not the CUDA runtime, so the
controller can check a config without initialising CUDA in the process that forks the workers
(a forked child cannot use CUDA that its parent initialised).
"""

from __future__ import annotations

import os
import re

import torch

NAME = re.compile(r"auto|cpu|cuda(:\d+)?")
ALLOWED = "auto, cpu, cuda, cuda:N"


def cuda_count() -> int:
    return torch.cuda.device_count()


def resolve(name: str, index: int = 0) -> torch.device:
    """The torch device for a config's device name; `index` spreads a group's members over GPUs."""
    if name == "auto":
        name = "cuda" if cuda_count() > 0 else "cpu"
    if name == "cuda":
        return torch.device("cuda", index % max(1, cuda_count()))
    return torch.device(name)


def problem(name: str, here: bool = True) -> str | None:
    """Why `name` is not a device name, or (`here`) cannot be used on this machine; else None."""
    if not NAME.fullmatch(name):
        return f"{name!r} is not a device name; allowed: {ALLOWED}"
    if not here:
        return None
    count = cuda_count()
    if name.startswith("cuda") and count == 0:
        return f"{name!r} asks for CUDA, but torch {torch.__version__} sees no CUDA device here; use auto or cpu"
    if name.startswith("cuda:") and int(name.split(":")[1]) >= count:
        return f"{name!r}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}"
    return None


def of(module: torch.nn.Module) -> torch.device:
    """Where `module`'s tensors are (its first parameter's or buffer's device; the CPU for one with none)."""
    return next(iter([*module.parameters(), *module.buffers()]), torch.empty(0)).device


def cpu_count() -> int:
    """CPUs this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
