"""One ranked checkpoint pool: what an ensemble's leaderboard and a self-play league both keep.

Its items (an ensemble's evaluations, a league's snapshots) each stand for a checkpoint and carry
a score. `admit(item)` adds one and answers which items it pushed out, by the pool's one rule:

* keep="best": the `capacity` highest scores, best first; on a tie the earlier stays ahead (the
  same return in fewer env steps) -- an ensemble's leaderboard (srl.population.tournament);
* keep="newest": the `capacity` latest admitted, oldest first -- a league's opponents
  (srl.population.league).

A pinned item (a league's scripted opponent) is never pushed out and takes no place of the
`capacity`; pinned items come first, in the order they came. An item whose score is NaN is not
admitted (it cannot be ranked). A pool's table is written as strict JSON, atomically
(`write_json`), and drawn by `render_table`: one renderer for `srl leaderboard` of either kind of run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from srl.faults import json_safe
from srl.storage import write_text_atomic

T = TypeVar("T")
Keep = Literal["best", "newest"]


class RankedPool(Generic[T]):
    def __init__(self, capacity: int, keep: Keep, score: Callable[[T], float],
                 pinned: Callable[[T], bool] = lambda item: False) -> None:
        if capacity < 1:
            raise ValueError(f"a pool's capacity must be >= 1, got {capacity}")
        if keep not in ("best", "newest"):
            raise ValueError(f"keep must be best or newest, got {keep!r}")
        self.capacity, self.keep, self.score, self.pinned = capacity, keep, score, pinned
        self.items: list[T] = []  # the pinned ones, then the others in the pool's order

    def admit(self, item: T) -> tuple[bool, list[T]]:
        """Add `item`: (whether it stays, the items it pushed out; itself not among them)."""
        if self.pinned(item):
            self.items = [*self._pinned(), item, *self._ranked_part()]
            return True, []
        if math.isnan(self.score(item)):
            return False, []
        others = [*self._ranked_part(), item]
        if self.keep == "best":
            others.sort(key=lambda i: -self.score(i))  # stable: the earlier of equal scores stays ahead
            kept, out = others[: self.capacity], others[self.capacity :]
        else:
            kept, out = others[-self.capacity :], others[: -self.capacity]
        self.items = [*self._pinned(), *kept]
        return not any(i is item for i in out), [i for i in out if i is not item]

    def ranked(self) -> list[T]:
        """Every item, best score first (pinned ones too: a scripted opponent is rated like the rest)."""
        return sorted(self.items, key=lambda i: -self.score(i))

    def _pinned(self) -> list[T]:
        return [i for i in self.items if self.pinned(i)]

    def _ranked_part(self) -> list[T]:
        return [i for i in self.items if not self.pinned(i)]

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


def write_json(path: Path, table: dict[str, Any]) -> None:
    """A pool's table, atomically (a reader never sees half of it; a failed write is srl.storage's
    WriteFailed) and strict: an evaluation of a NaN env scores null, not NaN (which only Python parses)."""
    write_text_atomic(Path(path), json.dumps(json_safe(table), indent=1, allow_nan=False) + "\n")


def render_table(title: str, caption: str, columns: Sequence[str], rows: Iterable[Sequence[str]],
           left: Sequence[str] = ()) -> Any:
    """A rich Table of a pool's rows, best first (the caller ranks them); `left`: the columns of
    names and paths, the others right-aligned numbers."""
    from rich.table import Table
    from rich.text import Text

    # every cell a Text: a str cell is parsed as rich markup, and a "[...]" in a lineage, a path or a
    # hyperparameter name would vanish
    out = Table(title=Text(title), caption=Text(caption))
    for column in columns:
        out.add_column(Text(column), justify="left" if column in left else "right")
    for row in rows:
        out.add_row(*[Text(cell) for cell in row])
    return out
