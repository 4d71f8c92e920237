"""Failures that a restart cannot mend, and the one-line messages they end a run with.

A worker that raises is normally restarted (srl.launch.supervise): a crashed simulator or a
killed process often runs fine the second time. Some failures would only repeat: an env that
returns NaN, updates that keep producing non-finite parameters, a run directory whose every
checkpoint is unusable. A worker raises `RunHalted` for those; its message is complete on one
line (what, where, what to do), and the controller ends the run with it at once, without
restarts and without a traceback.
"""

from __future__ import annotations

import math
from typing import Any


class RunHalted(RuntimeError):
    """End the run now with this message (no restart, no traceback)."""


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float replaced by None, so that strict JSON can hold it
    (json.dumps writes NaN / Infinity otherwise, which no JSON parser but Python's accepts)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def first_nonfinite(tree: Any) -> str | None:
    """The dotted name of the first floating tensor in `tree` (nested dicts / lists of tensors,
    e.g. a state_dict) that holds a NaN or an infinity; None when every one is finite.

    Fast path: one norm per tensor in one foreach call per device and dtype, finite when the
    tensors are; cheap next to the update that made them. A norm can overflow for huge finite
    values: only then (or for a real NaN) are the tensors checked one by one, by name."""
    import torch

    groups: dict[Any, list[Any]] = {}
    for _, t in _named(tree, ""):
        groups.setdefault((t.device, t.dtype), []).append(t)
    if all(bool(torch.stack(torch._foreach_norm(ts)).isfinite().all()) for ts in groups.values()):
        return None
    return next((name for name, t in _named(tree, "") if not bool(torch.isfinite(t).all())), None)


def _named(tree: Any, prefix: str) -> Any:
    """(dotted name, detached tensor) of each non-empty floating tensor of `tree`."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _named(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(tree, (list, tuple)):
        for i, value in enumerate(tree):
            yield from _named(value, f"{prefix}.{i}" if prefix else str(i))
    elif getattr(tree, "is_floating_point", None) is not None and tree.is_floating_point() and tree.numel():
        yield prefix or "tensor", tree.detach()
