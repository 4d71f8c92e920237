"""Replay of whole segment rows, for recurrent Q-learning (R2D2, Kapturowski et al., 2019).

A feed-forward replay stores n-step transitions (srl.data.replay); a recurrent one stores each
row of a segment as one sequence of T + 1 steps with the state its core had at step 0, so the
trainer can re-run the core from there (burn-in first) and compute n-step targets inside the
sequence. The same ReplayMemory holds them: one item = one sequence, prioritized as a whole.
"""

from __future__ import annotations

import numpy as np

from srl.api.policy import FieldSpec
from srl.data import columns as C

STEP_COLUMNS = (C.OBS, C.ACTION, C.REWARD, C.TERMINATED, C.TRUNCATED, C.FIRST)  # kept at every step


def sequence_fields(obs: FieldSpec, action: FieldSpec, sample_length: int, state: FieldSpec) -> dict[str, FieldSpec]:
    """What the memory stores per sequence: [T + 1] of each step column, and the start state."""
    per_step = {
        C.OBS: obs, C.ACTION: action, C.REWARD: FieldSpec((), np.float32), C.TERMINATED: FieldSpec((), np.bool_),
        C.TRUNCATED: FieldSpec((), np.bool_), C.FIRST: FieldSpec((), np.bool_),
    }  # fmt: skip
    fields = {name: FieldSpec((sample_length + 1, *f.shape), f.dtype) for name, f in per_step.items()}
    return {**fields, C.HIDDEN: state}


def segment_sequences(segment: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The rows of a [T + 1, rows, ...] segment as sequences [rows, T + 1, ...] (copies)."""
    out = {name: np.ascontiguousarray(np.swapaxes(segment[name], 0, 1)) for name in STEP_COLUMNS}
    out[C.HIDDEN] = segment[C.HIDDEN][0].copy()  # the state entering step 0
    return out
