"""Acting on CUDA without burning a core (srl.workers.policy.Acting's path where the policy is on CUDA).

Measured on an H100 (docs/benchmarks.md, "GPUs"): the policy worker was busy 75-83% of a Pong run,
most of it spinning in blocking `.cpu()` copies (one per output), and a staging that first
concatenated observations into a pinned buffer was 0.6-0.9x as fast as plain copies. This path:

* copies each inference slot's observations straight to the device: the slots (shared memory)
  are registered as pinned host memory (`PinnedSlots`, cudaHostRegister), so each copy is a DMA
  from the slot, with no concatenation on the host;
* packs every output (actions, log-probs, values, ...) into one device byte buffer: ONE copy back,
  into reused pinned memory, split on the host into views (`pack`, `unpack`);
* waits on a CUDA event made with blocking sync: the thread sleeps until the copy is done instead
  of spinning in cudaStreamSynchronize;
* replays the forward pass as a CUDA graph captured once per batch size in `GRAPH_ROWS`, a batch
  padded to the next captured size (`graph_rows_for`); a larger batch runs eagerly.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from srl.api.policy import Policy
from srl.spaces import obs_of

log = logging.getLogger(__name__)

GRAPH_SETTINGS = ("auto", "on", "off")
# batch sizes captured (rows): a policy worker's batch is a few actors' splits; each graph holds
# its own activations (the Nature CNN at 1,024 rows: about 60 MB)
GRAPH_ROWS = (1, 8, 32, 64, 128, 256, 512, 1024)
ALIGN_BYTES = 8  # every packed output starts at a multiple of the widest element (int64, float64)


def graph_rows_for(rows: int, sizes: Sequence[int] = GRAPH_ROWS) -> int | None:
    """The captured batch size a batch of `rows` is padded to: the smallest one >= rows; None above
    the largest (that batch runs eagerly)."""
    fitting = [size for size in sizes if size >= rows]
    return min(fitting) if fitting else None


def use_graphs(setting: str, device: torch.device, policy: Policy, sampling_seed: int | None,
               action_noise: object | None) -> bool:
    """Whether acting replays CUDA graphs (`devices.policy_graphs`): never off CUDA, for a
    recurrent policy (its state moves between requests), with action noise (drawn on the host per
    request) or in deterministic mode (reseeded per request); `auto` only for a policy that
    declares `graph_safe` (no host syncs, no data-dependent shapes in its rollout), `on` for any."""
    if setting not in GRAPH_SETTINGS:
        raise ValueError(f"devices.policy_graphs must be one of {', '.join(GRAPH_SETTINGS)}, got {setting!r}")
    if setting == "off" or device.type != "cuda" or policy.recurrent:
        return False
    if sampling_seed is not None or action_noise is not None:
        return False
    return setting == "on" or bool(getattr(policy, "graph_safe", False))


# -- one packed copy of the outputs ------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """Where one output lies in a packed byte buffer."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]  # [rows, ...]
    offset: int  # bytes

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _packable(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor of a dtype numpy has (bfloat16 goes back as float32)."""
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.contiguous()


def pack_layout(tensors: dict[str, torch.Tensor], names: Sequence[str]) -> list[Part]:
    """The offsets of `names`' tensors, in order, each aligned to ALIGN_BYTES."""
    parts, offset = [], 0
    for name in names:
        tensor = tensors[name]
        dtype = torch.float32 if tensor.dtype == torch.bfloat16 else tensor.dtype
        part = Part(name, _numpy_dtype(dtype), tuple(tensor.shape), offset)
        parts.append(part)
        offset += -(-part.nbytes // ALIGN_BYTES) * ALIGN_BYTES
    return parts


def packed_nbytes(layout: Sequence[Part]) -> int:
    return -(-(layout[-1].offset + layout[-1].nbytes) // ALIGN_BYTES) * ALIGN_BYTES if layout else 0


def pack(tensors: dict[str, torch.Tensor], names: Sequence[str]) -> tuple[torch.Tensor, list[Part]]:
    """`names`' tensors as one flat uint8 tensor on their device (one copy moves them all), and
    where each lies in it."""
    layout = pack_layout(tensors, names)
    pieces = []
    for part in layout:
        raw = _packable(tensors[part.name]).reshape(-1).view(torch.uint8)
        pieces.append(raw)
        pad = -part.nbytes % ALIGN_BYTES
        if pad:
            pieces.append(raw.new_zeros(pad))
    return torch.cat(pieces), layout


def unpack(packed: np.ndarray, layout: Sequence[Part], rows: int | None = None) -> dict[str, np.ndarray]:
    """Views of each output in the host copy of a packed buffer (no copy), its first `rows` rows."""
    out = {}
    for part in layout:
        view = packed[part.offset:part.offset + part.nbytes].view(part.dtype).reshape(part.shape)
        out[part.name] = view if rows is None else view[:rows]
    return out


# -- slots as pinned memory ----------------------------------------------------------------------------


def page_ranges(arrays: Sequence[np.ndarray], page: int = mmap.PAGESIZE) -> list[tuple[int, int]]:
    """(start address, bytes) of the whole pages that hold `arrays`, overlapping or touching ones
    merged: cudaHostRegister refuses a range that overlaps one registered already."""
    spans = sorted((a.ctypes.data // page * page, -(-(a.ctypes.data + a.nbytes) // page) * page)
                   for a in arrays if a.nbytes)
    merged: list[list[int]] = []
    for start, stop in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return [(start, stop - start) for start, stop in merged]


class PinnedSlots:
    """Inference slots' host memory registered with CUDA as pinned (page-locked): a copy from it to
    the device is an asynchronous DMA. Ranges that cannot be registered (pinned already, or a
    sandbox that refuses it) stay pageable: their copies still work, synchronously. `close`
    unregisters what this object registered."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.ranges: list[tuple[int, int]] = []  # registered by this object

    def register(self, arrays: Sequence[np.ndarray]) -> int:
        """Register the pages of `arrays` not registered yet; the bytes now pinned."""
        done = 0
        for start, size in page_ranges(arrays):
            if any(s <= start < s + n for s, n in self.ranges) or _pinned(start):
                continue
            try:
                err = torch.cuda.cudart().cudaHostRegister(start, size, 1)  # cudaHostRegisterPortable: pinned for every device
            except Exception as e:  # noqa: BLE001  (a torch without the binding: pageable copies)
                log.warning("inference slots stay pageable: %s: %s", type(e).__name__, e)
                return done
            if int(err) != 0:
                _clear_last_error(self.device)
                log.warning("inference slots at %#x (%d bytes) stay pageable: cudaHostRegister gave %s", start, size, err)
                continue
            self.ranges.append((start, size))
            done += size
        return done

    def close(self) -> None:
        for start, _ in self.ranges:
            if int(torch.cuda.cudart().cudaHostUnregister(start)) != 0:
                _clear_last_error(self.device)
        self.ranges = []


def _pinned(address: int) -> bool:
    """Whether the byte at `address` is pinned already (torch asks CUDA, and clears its error)."""
    return bool(torch.from_numpy(np.ctypeslib.as_array((ctypes.c_uint8 * 1).from_address(address))).is_pinned())


def _clear_last_error(device: torch.device) -> None:
    """Reset CUDA's last error after a refused runtime call: torch's check after its next kernel
    launch reads it (cudaGetLastError, which torch does not expose) and would blame that kernel.
    A one-element fill launches a kernel: its check reads the error, which resets it, and raises."""
    try:
        torch.empty(1, device=device).fill_(1.0)
    except RuntimeError:
        pass


# -- the acting path ---------------------------------------------------------------------------------


def leaves(obs: Any) -> dict[str, np.ndarray]:
    """An observation's arrays by leaf path ("" for a single array)."""
    return dict(obs) if isinstance(obs, dict) else {"": obs}


def as_obs(by_leaf: dict[str, Any]) -> Any:
    return by_leaf[""] if list(by_leaf) == [""] else by_leaf


@dataclass
class Graphed:
    graph: torch.cuda.CUDAGraph
    inputs: dict[str, torch.Tensor]  # leaf -> [rows, ...] static input
    packed: torch.Tensor  # static packed outputs
    layout: list[Part]


class CudaActing:
    """Observations of a list of slots to the device, the policy's rollout (graphed or eager), and
    the outputs back as numpy views (valid until the next call)."""

    def __init__(self, policy: Policy, outputs: Sequence[str], device: torch.device, graphs: bool) -> None:
        self.policy = policy
        self.outputs = list(outputs)
        self.device = device
        self.graphs = graphs
        self.pinned = PinnedSlots(device)
        self._graphed: dict[int, Graphed] = {}
        self._host = torch.empty(0, dtype=torch.uint8)
        # its synchronize sleeps instead of spinning; none on the CPU, where a test takes this path's
        # copies, packing and splitting (Acting itself never does: it keeps its plain path there)
        self._done = torch.cuda.Event(blocking=True) if device.type == "cuda" else None
        self.graph_batches = 0  # batches answered by a graph replay so far
        if device.index is not None:  # graph capture and replay use the current device's stream
            torch.cuda.set_device(device)

    def pin(self, slots: Sequence[dict[str, np.ndarray]]) -> None:
        self.pinned.register([array for slot in slots for array in slot.values()])

    def close(self) -> None:
        self.pinned.close()
        self._graphed.clear()

    def __call__(self, slots: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        per_slot = [leaves(obs_of(slot)) for slot in slots]
        rows = sum(len(next(iter(obs.values()))) for obs in per_slot)
        size = graph_rows_for(rows) if self.graphs else None
        graphed = self._graph(size, per_slot[0]) if size is not None else None
        with torch.inference_mode():
            if graphed is not None:
                self._to_device(per_slot, graphed.inputs)
                graphed.graph.replay()
                packed, layout = graphed.packed, graphed.layout
                self.graph_batches += 1
            else:
                inputs = {path: torch.empty((rows, *leaf.shape[1:]), dtype=torch.from_numpy(leaf[:0]).dtype,
                                            device=self.device) for path, leaf in per_slot[0].items()}
                self._to_device(per_slot, inputs)
                packed, layout = pack(self.policy.rollout(as_obs(inputs)), self.outputs)
            host = self._host_buffer(packed.numel())
            host.copy_(packed, non_blocking=True)
            if self._done is not None:
                self._done.record(torch.cuda.current_stream(self.device))  # the stream the copy was queued on
        if self._done is not None:
            self._done.synchronize()
        return unpack(host.numpy(), layout, rows)

    def _to_device(self, per_slot: list[dict[str, np.ndarray]], inputs: dict[str, torch.Tensor]) -> None:
        """Each slot's observations into its rows of `inputs`: one copy per slot and leaf, from the
        slot itself (a DMA where it is pinned); rows past the batch keep what they held."""
        start = 0
        for obs in per_slot:
            stop = start
            for path, leaf in obs.items():
                stop = start + len(leaf)
                inputs[path][start:stop].copy_(torch.from_numpy(leaf), non_blocking=True)
            start = stop

    def _host_buffer(self, nbytes: int) -> torch.Tensor:
        if self._host.numel() < nbytes:
            self._host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=self.device.type == "cuda")
        return self._host[:nbytes]

    def _graph(self, rows: int, example: dict[str, np.ndarray]) -> Graphed | None:
        """The graph for batches of `rows`, captured on first use; None (eager from then on) where
        capturing fails: a policy that syncs with the host cannot be captured."""
        if rows in self._graphed:
            return self._graphed[rows]
        try:
            graphed = self._capture(rows, example)
        except Exception as e:  # noqa: BLE001  (any capture error: acting goes on eagerly)
            log.warning("acting stays eager: capturing its CUDA graph failed (%s: %s)", type(e).__name__, e)
            _clear_last_error(self.device)  # an invalidated capture leaves its error for the next launch
            self.graphs = False
            return None
        self._graphed[rows] = graphed
        return graphed

    def _capture(self, rows: int, example: dict[str, np.ndarray]) -> Graphed:
        with torch.inference_mode():
            inputs = {path: torch.zeros((rows, *leaf.shape[1:]), dtype=torch.from_numpy(leaf[:0]).dtype,
                                        device=self.device) for path, leaf in example.items()}
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):  # warm-up off the capture: kernels chosen, workspaces made
                for _ in range(2):
                    pack(self.policy.rollout(as_obs(inputs)), self.outputs)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            # autocast's cache would keep weights cast at capture time: new weights, copied in
            # place by the parameter subscriber, must be cast again on every replay
            cache = torch.is_autocast_cache_enabled()
            torch.set_autocast_cache_enabled(False)
            try:
                with torch.cuda.graph(graph):
                    packed, layout = pack(self.policy.rollout(as_obs(inputs)), self.outputs)
            finally:
                torch.set_autocast_cache_enabled(cache)
        return Graphed(graph, inputs, packed, layout)
