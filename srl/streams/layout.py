"""Named arrays packed into one flat buffer (shared memory or local), at fixed offsets.

Both sides of a stream compute the same `Layout` from the same declaration, so a message only
needs to name a slot; the arrays never travel inside a node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALIGN_BYTES = 64  # cache-line alignment, so two writers of neighbouring arrays never share a line


@dataclass(frozen=True)
class ArraySpec:
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


class Layout:
    """An ordered set of named arrays and their byte offsets in one buffer."""

    def __init__(self, arrays: dict[str, ArraySpec]) -> None:
        self.arrays = dict(arrays)
        self.offsets: dict[str, int] = {}
        offset = 0
        for name, spec in self.arrays.items():
            self.offsets[name] = offset
            offset += -(-spec.nbytes // ALIGN_BYTES) * ALIGN_BYTES
        self.nbytes = max(offset, ALIGN_BYTES)

    def views(self, buffer: memoryview | bytearray) -> dict[str, np.ndarray]:
        """Arrays viewing `buffer` (no copy); writes through them land in the buffer."""
        if len(buffer) < self.nbytes:
            raise ValueError(f"buffer of {len(buffer)} bytes is smaller than the layout's {self.nbytes}")
        return {
            name: np.ndarray(spec.shape, spec.dtype, buffer=buffer, offset=self.offsets[name])
            for name, spec in self.arrays.items()
        }


def poison(arrays: dict[str, np.ndarray]) -> None:
    """Fill arrays with values no real sample has (NaN, -1, True), so a read of an unwritten
    slot shows up in tests instead of passing as plausible zeros."""
    for array in arrays.values():
        if array.dtype.kind == "f":
            array.fill(np.nan)
        elif array.dtype.kind == "b":
            array.fill(True)
        else:
            array.fill(-1)
