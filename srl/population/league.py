"""A self-play league: snapshots of a trained policy, an opponent drawn per episode, and a table of
results with an Elo rating per snapshot (league.json).

A plain kernel with no I/O but `save`/`load`: the trainer's side adds a snapshot every
`snapshot_interval_updates`; whoever plays draws an opponent per episode and reports each game's
outcome for the learner (+1 win, 0 draw, -1 loss). Opponents are drawn by `choose`:

* `uniform`: any snapshot in the pool alike;
* `latest`: the newest snapshot (plain self-play against the last frozen copy);
* `weighted`: toward the snapshots the learner loses to: weight (1 - score + 0.1)^2, where score
  is the learner's mean points against it (win 1, draw 0.5) with a prior of one draw, so a
  snapshot it always beats is still drawn now and then.

The pool keeps the newest `pool_size` snapshots; the table keeps every snapshot ever made, with
its record and rating. Scripted opponents (`add_scripted`: a registered scripted policy such as
connect4-lookahead) stay in the pool for good, drawn and rated like the snapshots: a fixed bar the
learner must keep clearing while its own snapshots move, and an anchor for the ratings.

Elo: the learner and each opponent hold a rating (1200 to start, a new snapshot starts at the
learner's rating then); each game moves both by K * (result - expected).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from srl.population.pool import RankedPool, render_table, write_json

Choose = Literal["uniform", "latest", "weighted"]
START_ELO = 1200.0


@dataclass
class Snapshot:
    name: str
    version: int  # the policy version frozen in it
    env_steps: int
    checkpoint: str  # where its weights are, relative to the run directory ("" for a scripted one)
    elo: float = START_ELO
    wins: int = 0  # the learner's results against it
    draws: int = 0
    losses: int = 0
    scripted: str = ""  # a scripted opponent's registered policy name ("": a snapshot of the learner)

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def learner_score(self) -> float:
        """The learner's mean points against it (win 1, draw 0.5), one prior draw included."""
        return (self.wins + 0.5 * self.draws + 0.5) / (self.games + 1)


def expected(rating: float, other: float) -> float:
    """Elo's expected score of `rating` against `other`."""
    return 1.0 / (1.0 + 10.0 ** ((other - rating) / 400.0))


class League:
    def __init__(self, pool_size: int = 10, choose: Choose = "weighted", k_factor: float = 16.0, seed: int = 0) -> None:
        if pool_size < 1:
            raise ValueError(f"pool_size must be >= 1, got {pool_size}")
        if choose not in ("uniform", "latest", "weighted"):
            raise ValueError(f"choose must be uniform, latest or weighted, got {choose!r}")
        self.pool_size, self.choose, self.k_factor = pool_size, choose, k_factor
        self.snapshots: dict[str, Snapshot] = {}  # every snapshot ever made, and the scripted ones
        # the opponents: the scripted ones (pinned), then the newest pool_size snapshots, oldest first
        self.opponents: RankedPool[Snapshot] = RankedPool(pool_size, "newest", score=lambda s: s.elo,
                                                          pinned=lambda s: bool(s.scripted))
        self.learner_elo = START_ELO
        self.rng = np.random.default_rng(seed)

    def add(self, version: int, env_steps: int, checkpoint: str) -> Snapshot:
        """Freeze the learner at `version` as a new opponent (the oldest leaves the pool when full)."""
        name = f"v{version}"
        if name in self.snapshots:
            raise ValueError(f"snapshot {name} exists already")
        snap = Snapshot(name, version, env_steps, checkpoint, elo=self.learner_elo)
        self.snapshots[name] = snap
        self.opponents.admit(snap)  # the oldest leaves the pool, not the table
        return snap

    def add_scripted(self, policy: str) -> Snapshot:
        """A scripted opponent (a registered policy name) that stays in the pool. Its version is a
        negative tag (-2, -3, ...; -1 is srl.population.league_pool's "no opponent yet")."""
        if policy in self.snapshots:
            raise ValueError(f"opponent {policy} exists already")
        version = -2 - sum(1 for s in self.snapshots.values() if s.scripted)
        snap = Snapshot(policy, version, 0, "", scripted=policy)
        self.snapshots[policy] = snap
        self.opponents.admit(snap)
        return snap

    @property
    def pool(self) -> list[str]:
        """The opponents' names: the scripted ones, then the snapshots oldest first."""
        return [s.name for s in self.opponents]

    def named(self, version: int) -> str | None:
        """The opponent playing as `version` (a snapshot's, or a scripted one's negative tag)."""
        if version >= 0:
            return f"v{version}" if f"v{version}" in self.snapshots else None
        return next((n for n, s in self.snapshots.items() if s.scripted and s.version == version), None)

    def draw(self) -> str | None:
        """The opponent for the next episode (None while the pool is empty)."""
        pool = self.pool
        if not pool:
            return None
        if self.choose == "latest":
            return pool[-1]
        if self.choose == "uniform":
            return pool[int(self.rng.integers(len(pool)))]
        weights = np.array([(1.0 - self.snapshots[n].learner_score + 0.1) ** 2 for n in pool])
        return pool[int(self.rng.choice(len(pool), p=weights / weights.sum()))]

    def record(self, opponent: str, result: float) -> None:
        """One game of the learner against `opponent`: result 1 (won), 0.5 or 0 (draw), -1 or 0 (lost).
        Takes +1 / 0 / -1 (a game's return sign)."""
        snap = self.snapshots[opponent]
        if result > 0:
            snap.wins, points = snap.wins + 1, 1.0
        elif result < 0:
            snap.losses, points = snap.losses + 1, 0.0
        else:
            snap.draws, points = snap.draws + 1, 0.5
        change = self.k_factor * (points - expected(self.learner_elo, snap.elo))
        self.learner_elo += change
        snap.elo -= change

    def table(self) -> list[dict]:
        """Every snapshot, best rated first, with the learner's record against it."""
        pool = set(self.pool)
        rows = [{**asdict(s), "games": s.games, "in_pool": s.name in pool} for s in self.snapshots.values()]
        return sorted(rows, key=lambda r: -r["elo"])

    def best(self) -> Snapshot | None:
        """The highest-rated snapshot of the learner (scripted opponents aside)."""
        return max((s for s in self.snapshots.values() if not s.scripted), key=lambda s: s.elo, default=None)

    def to_json(self) -> dict:
        return {"learner_elo": self.learner_elo, "choose": self.choose, "pool_size": self.pool_size,
                "k_factor": self.k_factor, "pool": self.pool, "snapshots": self.table()}

    def save(self, path: Path) -> None:
        """Atomically (a reader never sees half a table); a failed write is srl.storage's WriteFailed."""
        write_json(Path(path), self.to_json())

    @classmethod
    def load(cls, path: Path, seed: int = 0) -> League:
        """The league as saved (a resumed run goes on with its table and pool)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: not a league table ({type(e).__name__}: {e})") from None
        try:
            return cls.from_json(data, seed)
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from None

    @classmethod
    def from_json(cls, data: Any, seed: int = 0) -> League:
        """The league of a `to_json()` (league.json's content; ValueError if it is none)."""
        try:
            league = cls(data["pool_size"], data["choose"], data["k_factor"], seed)
            league.learner_elo = float(data["learner_elo"])
            fields = set(Snapshot.__dataclass_fields__)
            for row in data["snapshots"]:
                snap = Snapshot(**{k: v for k, v in row.items() if k in fields})
                league.snapshots[snap.name] = snap
            league.opponents.items = [league.snapshots[n] for n in data["pool"] if n in league.snapshots]
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"not a league table ({type(e).__name__}: {e})") from None
        return league


FILE = "league.json"


def render(league: League) -> Any:
    """A rich Table of the snapshots, best rated first (`srl leaderboard RUN_DIR` of a league run)."""
    rows = [[str(rank), row["name"], str(row["version"]), str(row["env_steps"]), f"{row['elo']:.0f}",
             f"{row['wins']} / {row['draws']} / {row['losses']}", "yes" if row["in_pool"] else ""]
            for rank, row in enumerate(league.table(), 1)]
    return render_table(f"league: learner Elo {league.learner_elo:.0f}, opponents drawn {league.choose}",
                        f"{len(league.pool)} of {len(league.snapshots)} snapshot(s) in the pool",
                        ("rank", "snapshot", "version", "env steps", "Elo", "learner W / D / L", "pool"), rows,
                        left=("snapshot",))
