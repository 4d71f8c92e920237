"""Host <-> device moves of one worker's batches: pinned staging, asynchronous copies, one wait.

A copy from pageable (ordinary) host memory to a GPU, or back, blocks the CPU until it is done,
and the driver stages it through its own pinned buffer first; one per observation leaf and one per
output made a batch of inference wait on the GPU three to five times. `Staging` keeps reusable
pinned host buffers instead: inputs are concatenated straight into them and sent with
`non_blocking=True`, outputs come back into them the same way, and the CPU waits once per batch
(`wait`), after which the numpy views of the output buffers hold the results.

A buffer is rewritten only by the next batch, after that batch's caller has waited for the one
before, so the copies that read or write it are done by then.

On the CPU there is nothing to move: `for_device` gives None, and callers keep their zero-copy
path (`torch.from_numpy` views in, `.numpy()` views out), decided once when they are made.

Users: acting (srl.workers.policy, inline or in a policy worker), the evaluator, the replay
trainer's batches and priorities, and published weights (srl.streams.params); the on-policy
trainer gathers its segments straight into `host_zeros` memory, which its algorithm moves.
"""

from __future__ import annotations

import math
from typing import Any, cast

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
    """Reusable host buffers for one worker's batches to and from `device`, one per name, each
    grown to the largest batch seen (never shrunk, never allocated per batch)."""

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

    def to_device(self, name: str, parts: list[np.ndarray]) -> torch.Tensor:
        """The rows of `parts`, concatenated into buffer `name` and sent on (asynchronously)."""
        rows = sum(len(p) for p in parts)
        staged = self.host(name, (rows, *parts[0].shape[1:]), torch_dtype(parts[0].dtype))
        np.concatenate(parts, out=staged.numpy())
        return staged.to(self.device, non_blocking=True)

    def to_host(self, name: str, tensor: torch.Tensor) -> np.ndarray:
        """`tensor` copied into buffer `name` (asynchronously): read the view only after `wait`."""
        staged = self.host(name, tuple(tensor.shape), tensor.dtype)
        staged.copy_(tensor, non_blocking=True)
        return staged.numpy()

    def leaves_to_device(self, name: str, parts: list[np.ndarray | dict[str, np.ndarray]]) -> Any:
        """`to_device` of one array per part, or of each leaf of dicts leaf path -> array (a
        Dict/Tuple observation, srl.spaces), each leaf in a buffer of its own."""
        if isinstance(parts[0], dict):
            dicts = cast(list[dict[str, np.ndarray]], parts)
            return {path: self.to_device(f"{name}/{path}", [p[path] for p in dicts]) for path in parts[0]}
        return self.to_device(name, cast(list[np.ndarray], parts))

    def wait(self) -> None:
        """Wait once for every copy queued so far (those of the batch at hand)."""
        wait(self.device)


def wait(device: torch.device) -> None:
    """Wait for the work queued on `device` so far (nothing to wait for on the CPU)."""
    if device.type == "cuda":  # copies are queued on the current stream, after the work they read
        torch.cuda.current_stream(device).synchronize()
    elif device.type != "cpu":
        torch.accelerator.synchronize(device)
