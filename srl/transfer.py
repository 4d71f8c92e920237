"""Host memory for what a worker moves between the CPU and a GPU: pinned, reused, one wait.

A copy from pageable (ordinary) host memory to a GPU, or back, blocks the CPU until it is done.
The on-policy trainer gathers its segments straight into `host_zeros` memory, pinned where the
policy is on a GPU, so the algorithm's `non_blocking=True` moves are asynchronous. Published
weights (srl.streams.params) come back into a `Staging`'s reused pinned buffers, one asynchronous
copy per tensor and one wait per version instead of one blocking copy per tensor.

The evaluator and the replay trainer keep their plain copies: a staging of acting's observations
and outputs, one wait per batch, measured 0.6-0.9x as fast as them on an H100 for batches of 8 to
4,096 rows (docs/benchmarks.md, "GPUs"), part of it the concatenation into the staging buffer.
Acting on CUDA has its own path without that concatenation (srl.workers.cuda_acting): the slots
themselves pinned, one packed copy back, a sleeping wait, CUDA graphs.

On the CPU there is nothing to move: `for_device` gives None and `host_zeros` ordinary memory.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def for_device(device: torch.device) -> Staging | None:
    """The staging for batches going to `device`; None on the CPU, where tensors view host memory."""
    return None if device.type == "cpu" else Staging(device)


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype)).dtype


def host_zeros(shape: tuple[int, ...], dtype: np.dtype, device: torch.device) -> torch.Tensor:
    """Zeroed host memory for batches bound for `device`: pinned for a GPU (copies from it are
    asynchronous, from pageable memory they are not), ordinary memory for the CPU."""
    if device.type == "cpu":
        return torch.from_numpy(np.zeros(shape, dtype))
    return torch.zeros(shape, dtype=torch_dtype(np.dtype(dtype)), pin_memory=device.type == "cuda")


class Staging:
    """Reusable host buffers for one worker's copies from `device`, one per name, each grown to
    the largest copy seen (never shrunk, never allocated per copy)."""

    def __init__(self, device: torch.device, pin: bool | None = None) -> None:
        self.device = device
        # pinning needs CUDA; pin=False lets a test on the CPU take the same copies and waits
        self.pin = device.type == "cuda" if pin is None else pin
        self._buffers: dict[str, torch.Tensor] = {}  # name -> flat host buffer

    def host(self, name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A host tensor of `shape` in buffer `name` (its first elements): valid until its next use."""
        size = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.dtype != dtype or buffer.numel() < size:
            buffer = self._buffers[name] = torch.empty(size, dtype=dtype, pin_memory=self.pin)
        return buffer[:size].view(shape)

    def to_host(self, name: str, tensor: torch.Tensor) -> np.ndarray:
        """`tensor` copied into buffer `name` (asynchronously): read the view only after `wait`."""
        staged = self.host(name, tuple(tensor.shape), tensor.dtype)
        staged.copy_(tensor, non_blocking=True)
        return staged.numpy()

    def wait(self) -> None:
        """Wait once for every copy queued so far."""
        wait(self.device)


def wait(device: torch.device) -> None:
    """Wait for the work queued on `device` so far (nothing to wait for on the CPU)."""
    if device.type == "cuda":  # copies are queued on the current stream, after the work they read
        torch.cuda.current_stream(device).synchronize()
    elif device.type != "cpu":
        torch.accelerator.synchronize(device)
