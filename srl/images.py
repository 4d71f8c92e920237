"""Image observations: which Box is an image, how its dims are laid out, how its values are scaled.

One place decides all three, so that the default policy (srl.graph.choose_policy), the CNN policy
(srl.models.cnn), the multi-input policy's image encoder (srl.models.multi_input), `srl graph` and
the run's first lines never disagree about an observation (issue 37: the CNN read Crafter's
64x64x3 frame as 64 channels of 64x3, while docs/spaces.md promised HxWxC).

An image is a Box of 2 or 3 dims whose values srl carries as uint8 (srl.spaces.leaf_array_spec:
uint8 Boxes, and bool or integer Boxes of 2 or 3 dims within 0..255, such as MinAtar's 0/1 grid
or a grid of small integer ids). Float Boxes are not images: their values are features already.

Layout. [H, W] is one channel. [A, B, C]: a square image says which dims are its sides, so
[A, A, C] is HxWxC and [C, A, A] is CxHxW, whatever the channel count (MiniGrid's one-hot view
[7, 7, 20]); otherwise the channels are the smaller of the first and last dims ([210, 160, 3]:
HxWxC), and a tie ([3, 3, 3], [5, 8, 5]) is read as CxHxW, torch's own layout and
srl.envs.atari's stacked frames. This reads every image env in use right: Atari [210, 160, 3]
and [4, 84, 84], Crafter [64, 64, 3], MinAtar [10, 10, 4], MiniGrid [7, 7, 3] and [7, 7, 20].
A layout it gets wrong (a non-square image with more channels than rows) is fixed in a wrapper
that transposes the frame (gymnasium.wrappers.TransformObservation).

Scaling. Values are mapped to [0, 1] by the space's own bounds, (x - low) / (high - low), with low
the smallest and high the largest bound: pixels 0..255 are divided by 255 as before, but a 0/1
grid by 1 (dividing MinAtar's grid by 255 left a CNN almost nothing to see: a mean return of 0.64
after 103k env steps of Breakout against about 5 for an MLP of the raw 0/1 values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeGuard

import gymnasium as gym
import numpy as np

MAX_UINT8 = 255
MIN_SIDE = 36  # the smallest side the Nature CNN's strides (4, 2, 1; kernels 8, 4, 3) leave a pixel of


@dataclass(frozen=True)
class ImageLayout:
    """How an image's dims are laid out: `channels_last` for [H, W, C]; [H, W] has one channel."""

    channels: int
    height: int
    width: int
    channels_last: bool
    dims: int  # 2 or 3, as the space has them

    @property
    def chw(self) -> tuple[int, int, int]:
        return self.channels, self.height, self.width

    @property
    def name(self) -> str:
        if self.dims == 2:
            return "HxW"
        return "HxWxC" if self.channels_last else "CxHxW"


def image_layout(shape: tuple[int, ...]) -> ImageLayout:
    """The layout of an image of `shape` (2 or 3 dims; see the module's docstring for the rule)."""
    shape = tuple(int(n) for n in shape)
    if len(shape) == 2:
        return ImageLayout(1, shape[0], shape[1], channels_last=False, dims=2)
    if len(shape) != 3:
        raise ValueError(f"an image has 2 dims [H, W] or 3 ([H, W, C] or [C, H, W]), got shape {shape}")
    a, b, c = shape
    square_first, square_last = a == b != c, b == c != a  # a square image's sides tell the layout
    if square_first or (not square_last and c < a):
        return ImageLayout(c, a, b, channels_last=True, dims=3)
    return ImageLayout(a, b, c, channels_last=False, dims=3)


def carried_as_uint8(space: gym.Space) -> TypeGuard[gym.spaces.Box]:
    """Whether srl keeps this Box's values as uint8: a uint8 Box, or a bool or integer Box of 2 or
    3 dims whose bounds lie within 0..255 (a grid of flags or small ids, 4x fewer bytes than float32)."""
    if not isinstance(space, gym.spaces.Box):
        return False
    if space.dtype == np.uint8:
        return True
    if len(space.shape) not in (2, 3):
        return False
    if space.dtype == np.bool_:
        return True
    if not np.issubdtype(space.dtype, np.integer):
        return False
    return bool(np.all(space.low >= 0) and np.all(space.high <= MAX_UINT8))


def as_uint8_space(space: gym.spaces.Box) -> gym.spaces.Box:
    """`space` as srl carries it when `carried_as_uint8`: uint8, with the same bounds."""
    if space.dtype == np.uint8:
        return space
    low, high = np.asarray(space.low).astype(np.uint8), np.asarray(space.high).astype(np.uint8)
    return gym.spaces.Box(low, high, space.shape, np.uint8)


def is_image(space: gym.Space) -> TypeGuard[gym.spaces.Box]:
    """A Box of 2 or 3 dims carried as uint8 (srl.spaces reports bool and small-integer grids so)."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) in (2, 3) and carried_as_uint8(space)


def value_range(space: gym.Space) -> tuple[float, float]:
    """(low, high) that map a Box's values to [0, 1]: its smallest and largest finite bounds;
    (0, 1), no change, where it has none or they are equal."""
    if not isinstance(space, gym.spaces.Box):
        return 0.0, 1.0
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        return 0.0, 1.0
    lo, hi = float(low.min()), float(high.max())
    return (lo, hi) if hi > lo else (0.0, 1.0)


def describe(space: gym.spaces.Box) -> str:
    """One line about an image space, for the policy line: 'Box(0, 255, (64, 64, 3), uint8), HxWxC,
    values / 255'."""
    layout = image_layout(tuple(space.shape))
    low, high = value_range(space)
    scaling = f"values / {high - low:g}" if low == 0 else f"values (x - {low:g}) / {high - low:g}"
    return f"{space}, {layout.name}, {scaling}"
