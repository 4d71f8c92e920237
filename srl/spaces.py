"""Dict and Tuple observations as columns: one array per leaf, named by the leaf's path.

Design. Everything that stores or moves samples (shared-memory slots, tcp frames, the trainer's
batch, minibatch slicing) already handles a flat dict of named arrays, each column with its own
shape and dtype, and treats every column alike. So a Dict or Tuple observation is flattened as it
leaves the env into one column per leaf, `obs/<path>`: nested keys and tuple indices joined by
'/' (`obs/image`, `obs/state/0`), each keeping its leaf's dtype (a uint8 image stays uint8, a
quarter of float32's bytes in every slot, frame and batch). Between the env and the policy
nothing knows about nesting: the generic per-column code carries the leaves as it carries any
column, and tcp frames, segments and batches get them for free. Only the policy's input is put
together again: a policy is given `obs_of(columns)`, the one `obs` array for a Box or Discrete
space (so single-input policies work unchanged), or for a Dict/Tuple space a flat dict leaf path
-> array (tensor) of rows (`unflatten_value` gives back the nesting to a policy that wants it).

Not chosen: a numpy structured dtype (one column, but keys interleaved row by row, and torch
cannot read it); a nested dict in every stream (every generic loop would have to recurse).

Leaves kept: Box (float32, or uint8 when the Box is uint8, or a bool or 0..255 integer Box of 2 or 3
dims: srl.images), Discrete (int64), MultiDiscrete and
MultiBinary (their dtype). Text, Graph, Sequence and OneOf (variable size, or not an array) raise
`UnsupportedSpace`, naming the key path and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, TypeVar

import gymnasium as gym
import numpy as np

from srl.api.policy import FieldSpec
from srl.data.columns import OBS
from srl.images import as_uint8_space, carried_as_uint8

SEP = "/"  # joins nested keys in a leaf's path (a layout name joins its parts with '.')
Obs = np.ndarray | dict[str, np.ndarray]  # rows of one array, or leaf path -> rows
T = TypeVar("T")


class UnsupportedSpace(ValueError):
    """An observation (or a key of one) that srl cannot keep as an array column."""

    def __init__(self, path: str, space: gym.Space) -> None:
        kind = type(space).__name__  # (not the space itself: a Text space's repr lists its charset)
        if path:
            where = f"observation key {path!r} is a {kind} space"
            fix = ("drop the key (e.g. gymnasium.wrappers.FilterObservation(env, filter_keys=[the other keys]) "
                   "where you make the env) or turn it into a Box or Discrete in a wrapper of your own")
        else:
            where = f"the observation space is a {kind} space"
            fix = ("wrap the env so that it observes a Box, Discrete, MultiDiscrete, MultiBinary "
                   "or a Dict/Tuple of them")
        super().__init__(f"{where}, which srl cannot keep as an array column; {fix}")
        self.path = path


def is_composite(space: gym.Space) -> TypeGuard[gym.spaces.Dict | gym.spaces.Tuple]:
    return isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple))


def _children(space: gym.spaces.Dict | gym.spaces.Tuple) -> list[tuple[Any, str, gym.Space]]:
    """(key to index a value with, its name in a path, sub-space) of a Dict or Tuple space."""
    if isinstance(space, gym.spaces.Dict):
        return [(key, str(key), sub) for key, sub in space.spaces.items()]
    return [(i, str(i), sub) for i, sub in enumerate(space.spaces)]


def _join(path: str, name: str) -> str:
    return f"{path}{SEP}{name}" if path else name


def leaf_spaces(space: gym.Space, path: str = "") -> dict[str, gym.Space]:
    """Leaf path -> leaf space, in the space's order ({"": space} for a space that is one leaf)."""
    if not is_composite(space):
        return {path: space}
    if not space.spaces:
        raise UnsupportedSpace(path, space)  # no leaf: nothing to observe
    leaves: dict[str, gym.Space] = {}
    for _, name, sub in _children(space):
        for leaf, leaf_space in leaf_spaces(sub, _join(path, name)).items():
            if leaf in leaves:
                raise ValueError(f"observation keys collide: two leaves have the path {leaf!r} "
                                 f"(nested keys are joined by {SEP!r})")
            leaves[leaf] = leaf_space
    return leaves


def leaf_array_spec(space: gym.Space, path: str = "") -> tuple[tuple[int, ...], np.dtype, gym.Space]:
    """(per-row shape, dtype, reported space) of the array holding one leaf's values."""
    if carried_as_uint8(space):
        # images stay uint8 on their way to the policy (4x fewer bytes through shared memory
        # and replay); every srl policy converts its input to float itself. A bool or small-integer
        # grid (MinAtar's 0/1 planes) becomes uint8 with its own bounds, on purpose: the bounds, not
        # the dtype, say how a CNN scales it (srl.images)
        return tuple(space.shape), np.dtype(np.uint8), as_uint8_space(space)
    if isinstance(space, gym.spaces.Box):
        if space.dtype == np.float32:
            return tuple(space.shape), np.dtype(np.float32), space
        with np.errstate(over="ignore"):
            low, high = np.asarray(space.low, dtype=np.float32), np.asarray(space.high, dtype=np.float32)
        return tuple(space.shape), np.dtype(np.float32), gym.spaces.Box(low, high, space.shape, np.float32)
    if isinstance(space, gym.spaces.Discrete):
        return (), np.dtype(np.int64), space
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return tuple(space.shape), np.dtype(space.dtype), space
    raise UnsupportedSpace(path, space)


def reported_space(space: gym.Space, path: str = "") -> gym.Space:
    """`space` as srl's arrays hold it (Box leaves as float32, uint8 ones as uint8)."""
    if not is_composite(space):
        return leaf_array_spec(space, path)[2]
    leaf_spaces(space, path)  # checks the keys (none empty, no two paths alike)
    children = [(key, reported_space(sub, _join(path, name))) for key, name, sub in _children(space)]
    if all(new is sub for (_, new), (_, _, sub) in zip(children, _children(space))):
        return space
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict(children)  # a list of pairs keeps the key order
    return gym.spaces.Tuple([sub for _, sub in children])


def column(path: str) -> str:
    """The sample column holding the leaf at `path` ("" = the one observation array: "obs")."""
    return f"{OBS}{SEP}{path}" if path else OBS


def is_obs_column(name: str) -> bool:
    return name == OBS or name.startswith(OBS + SEP)


def obs_columns(names: Any) -> list[str]:
    """The observation columns among `names` (a slot, a segment, a batch), in their order."""
    return [name for name in names if is_obs_column(name)]


def obs_fields(space: gym.Space) -> dict[str, FieldSpec]:
    """Column -> per-row shape and dtype of the observations of `space`."""
    return {column(path): spec for path, spec in leaf_fields(space).items()}


def leaf_fields(space: gym.Space) -> dict[str, FieldSpec]:
    """Leaf path -> per-row shape and dtype of its values."""
    return {path: FieldSpec(*leaf_array_spec(leaf, path)[:2]) for path, leaf in leaf_spaces(space).items()}


# -- observation values: one array (or tensor) of rows, or a flat dict leaf path -> rows ----------


def obs_of(columns: Mapping[str, T], name: str = OBS) -> T | dict[str, T]:
    """The observation in `columns` (a slot, a segment, a batch): its "obs" column, or the dict
    leaf path -> column of a Dict/Tuple observation. `name`: another observation's columns (a
    replay batch's "next_obs", "next_obs/<path>")."""
    if name in columns:
        return columns[name]
    start = len(name) + len(SEP)
    return {column[start:]: value for column, value in columns.items() if column.startswith(name + SEP)}


def map_obs(fn: Callable[[Any], Any], obs: Any) -> Any:
    """`fn` applied to the one array, or to each leaf."""
    if isinstance(obs, dict):
        return {path: fn(leaf) for path, leaf in obs.items()}
    return fn(obs)


def map_obs_pair(fn: Callable[[list[Any]], Any], first: Any, second: Any) -> Any:
    """`fn([a, b])` of two observations' arrays, or leaf by leaf (torch.cat of obs and next_obs)."""
    if isinstance(first, dict):
        return {path: fn([leaf, second[path]]) for path, leaf in first.items()}
    return fn([first, second])


def num_rows(obs: Any) -> int:
    return len(next(iter(obs.values()))) if isinstance(obs, dict) else len(obs)


def assign(dst: Any, src: Any, index: Any = slice(None)) -> None:
    """dst[index] = src, leaf by leaf."""
    if isinstance(dst, dict):
        for path, leaf in dst.items():
            leaf[index] = src[path]
    else:
        dst[index] = src


def concat_obs(parts: list[Any]) -> Any:
    if isinstance(parts[0], dict):
        return {path: np.concatenate([p[path] for p in parts]) for path in parts[0]}
    return np.concatenate(parts)


def obs_buffers(space: gym.Space, rows: int) -> tuple[Obs, gym.Space]:
    """Zeroed arrays for `rows` observations of `space` (one per leaf for Dict/Tuple), and the
    space as they hold it (see `reported_space`)."""
    reported = reported_space(space)
    arrays = {path: np.zeros((rows, *spec.shape), spec.dtype) for path, spec in leaf_fields(reported).items()}
    return (arrays if is_composite(reported) else arrays[""]), reported


def flatten_value(space: gym.Space, value: Any, path: str = "") -> dict[str, Any]:
    """One observation as the env gives it (nested dicts and tuples) -> leaf path -> leaf value."""
    if not is_composite(space):
        return {path: value}
    out: dict[str, Any] = {}
    for key, name, sub in _children(space):
        out.update(flatten_value(sub, value[key], _join(path, name)))
    return out


def unflatten_value(space: gym.Space, flat: Mapping[str, Any], path: str = "") -> Any:
    """Leaf path -> value (one observation, or rows of them) back to the nesting of `space`."""
    if not is_composite(space):
        return flat[path]
    parts = {key: unflatten_value(sub, flat, _join(path, name)) for key, name, sub in _children(space)}
    return parts if isinstance(space, gym.spaces.Dict) else tuple(parts.values())


def put_row(buffers: Obs, space: gym.Space, row: Any, value: Any) -> None:
    """Write one env's observation `value` (of `space`, as the env gives it) into row `row`."""
    if isinstance(buffers, dict):
        for path, leaf in flatten_value(space, value).items():
            buffers[path][row] = leaf
    else:
        buffers[row] = value
