"""Tournament kernel: the leaderboard and the replacement policy of a pod ensemble (no processes).

ElegantRL-podracer's tournament-based ensemble, as plain bookkeeping. K members train at once;
each evaluates itself now and then and reports an `Entry` (member, env steps, eval return,
hyperparameters, checkpoint). `Tournament.on_eval(entry)` answers, for that one report:

* whether the entry joins the leaderboard (the `size` best evaluations ever seen, each with its
  checkpoint), and which earlier entry it pushes out (its checkpoint can be deleted);
* whether the reporting member is lagging and is to be replaced now, and by what: a copy of a
  leaderboard entry (weights, optimizer state) with each perturbed hyperparameter multiplied by
  a factor drawn from `factors` (x0.8 or x1.25).

Replacement is asynchronous, not generational: only the member that just reported can be
replaced, so members change one at a time as they fall behind, and the others never wait.
A member is lagging when it has had `ready_evals` evaluations since it (re)started, and its
latest return ranks in the bottom `lag_fraction` of the members' latest returns (at least the
worst one), and is more than `margin` below the best member's. The source is drawn uniformly
from the top `exploit_top` leaderboard entries (1 = always the best).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from srl.population.pool import RankedPool


@dataclass(frozen=True)
class Entry:
    """One evaluation of one member."""

    member: int
    env_steps: int  # the member's own env steps when it was evaluated
    eval_return: float
    hparams: dict[str, float]
    checkpoint: str  # where the weights and optimizer state of this evaluation are
    time_s: float = 0.0  # seconds since the ensemble started
    lineage: str = ""  # "m2", or "m0@4096>m2": m2 restarted from m0's entry at 4096 steps


@dataclass(frozen=True)
class Replace:
    """Decision: member `member` becomes a copy of `source`, with hyperparameters `hparams`."""

    member: int
    source: Entry
    hparams: dict[str, float]


@dataclass
class Decision:
    """What `on_eval` decided for one entry."""

    admitted: bool  # the entry joined the leaderboard (keep its checkpoint)
    evicted: list[Entry] = field(default_factory=list)  # entries pushed off (delete their checkpoints)
    replace: Replace | None = None


@dataclass
class _Member:
    evals_since_start: int = 0
    latest: float | None = None
    lineage: str = ""


class Tournament:
    def __init__(
        self,
        population: int,
        size: int = 5,
        ready_evals: int = 2,
        lag_fraction: float = 0.25,
        margin: float = 0.0,
        exploit_top: int = 1,
        perturb: tuple[str, ...] = ("lr",),
        factors: tuple[float, ...] = (0.8, 1.25),
        seed: int = 0,
    ) -> None:
        if population < 1 or size < 1 or ready_evals < 1 or exploit_top < 1:
            raise ValueError(
                f"population ({population}), size ({size}), ready_evals ({ready_evals}) and "
                f"exploit_top ({exploit_top}) must be >= 1"
            )
        if not 0.0 < lag_fraction <= 1.0:
            raise ValueError(f"lag_fraction must be in (0, 1], got {lag_fraction}")
        if not factors or any(f <= 0 for f in factors):
            raise ValueError(f"factors must be positive, got {factors}")
        self.population, self.size, self.ready_evals = population, size, ready_evals
        self.lag_fraction, self.margin, self.exploit_top = lag_fraction, margin, exploit_top
        self.perturb, self.factors = tuple(perturb), tuple(factors)
        self.seed = seed
        self.rng = random.Random(seed)
        # the leaderboard: the `size` best returns (srl.population.pool); a NaN one is not ranked
        self.board: RankedPool[Entry] = RankedPool(size, "best", score=lambda e: e.eval_return)
        self.members = [_Member(lineage=f"m{k}") for k in range(population)]
        self.replacements: list[dict[str, Any]] = []

    # -- the leaderboard --------------------------------------------------------------------------

    @property
    def entries(self) -> list[Entry]:
        """The leaderboard, best first."""
        return self.board.items

    # -- replacement ------------------------------------------------------------------------------

    def on_eval(self, entry: Entry) -> Decision:
        """Record one member's evaluation; decide the leaderboard and whether it is replaced."""
        if not 0 <= entry.member < self.population:
            raise ValueError(f"member {entry.member} is not in a population of {self.population}")
        state = self.members[entry.member]
        entry = replace(entry, lineage=state.lineage)
        state.evals_since_start += 1
        state.latest = entry.eval_return
        admitted, evicted = self.board.admit(entry)
        decision = Decision(admitted=admitted, evicted=evicted)
        if self.lagging(entry.member):
            decision.replace = self._replacement(entry.member)
        return decision

    def lagging(self, member: int) -> bool:
        state = self.members[member]
        if state.evals_since_start < self.ready_evals or state.latest is None or not self.entries:
            return False
        scores = sorted(m.latest for m in self.members if m.latest is not None)
        if len(scores) < 2:
            return False  # nobody to compare with yet
        cut = scores[max(1, int(len(scores) * self.lag_fraction)) - 1]  # the bottom fraction's top score
        return state.latest <= cut and state.latest < scores[-1] - self.margin

    def _replacement(self, member: int) -> Replace:
        source = self.rng.choice(self.entries[: self.exploit_top])
        hparams = dict(source.hparams)
        for name in self.perturb:
            if name in hparams:
                hparams[name] = hparams[name] * self.rng.choice(self.factors)
        state = self.members[member]
        state.evals_since_start, state.latest = 0, None  # a fresh start: judged again after ready_evals
        # who it descends from, newest last (long chains keep their recent end)
        state.lineage = f"{source.lineage}@{source.env_steps}>m{member}"[-80:]
        self.replacements.append(
            {"member": member, "source_member": source.member, "source_env_steps": source.env_steps,
             "source_return": source.eval_return, "hparams": hparams}
        )
        return Replace(member, source, hparams)

    def restore(self, table: dict[str, Any]) -> None:
        """Continue from a `table()` of the same population (a resumed run's leaderboard.json)."""
        if table["population"] != self.population:
            raise ValueError(f"a leaderboard of {table['population']} members, not {self.population}")
        self.board.items = [Entry(**e) for e in table["entries"]]
        self.replacements = list(table["replacements"])
        self.members = [_Member(m["evals_since_start"], m["latest_return"], m["lineage"]) for m in table["members"]]
        self.rng = random.Random(f"{self.seed}/{len(self.replacements)}")  # not the first launch's draws again

    def table(self) -> dict[str, Any]:
        """JSON-able state: the leaderboard, the replacements so far, each member's latest return."""
        return {
            "population": self.population,
            "entries": [asdict(e) for e in self.entries],
            "replacements": list(self.replacements),
            "members": [
                {"member": k, "latest_return": m.latest, "evals_since_start": m.evals_since_start,
                 "lineage": m.lineage}
                for k, m in enumerate(self.members)
            ],
        }
