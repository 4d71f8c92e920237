"""The population manager of a pod ensemble: a part of the controller, whatever the launcher.

    pod:k (srl.workers.member) --report, "evals" with their weights--> RunMonitor.on_report (srl.launch.monitor)
        --> PopulationManager.on_report(report): an observer of the monitor (srl.launch.observers)
              each eval: Tournament.on_eval (srl.population.tournament): its weights kept as the
              entry's file here (run_dir/leaderboard/) if it ranks, else dropped;
              k lagging? -> adopt n of k: a private copy of the source entry (members/m<k>/adopt.pt
              here), perturbed hyperparameters
        <-- take_commands(): [(k, adopt n, the copy's weights)], sent by the launcher on control.out
            (local, Ray) or handed to the kernel (inline); sent again while k's reports show fewer adoptions

The weights travel with the reports and the adopts (srl.streams.control attaches them as frames),
so every file here is the controller's own: a member on another node shares no disk with it.

The members are the graph's pod workers: placed, supervised and restarted like any worker (a
restarted member continues from its own checkpoint and member.json). leaderboard.json is written
on every change; with run.resume= the manager continues from it (entries, replacements, each
member's latest return and lineage), and each member from its checkpoint. The stop rules are the
monitor's: the target is reached when one member's last 100 training episodes reach it.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any

from srl.config import ConfigError, ExperimentConfig
from srl.launch.observers import ObservedReport
from srl.population import leaderboard
from srl.population.tournament import Entry, Tournament
from srl.storage import atomic_file, failing_as
from srl.streams.control import Role
from srl.streams.reports import Key, MemberEval, PodReport
from srl.workers.member import member_folder

ADOPT_FILE = "adopt.pt"  # members/m<k>/adopt.pt: the controller's copy of what member k adopts last
RESEND_S = 2.0  # an adopt not yet shown in the member's reports (missed, or its member restarted)


def make_tournament(config: ExperimentConfig) -> Tournament:
    e = config.pod.ensemble
    return Tournament(
        e.population, size=e.leaderboard_size, ready_evals=e.ready_evals, lag_fraction=e.lag_fraction,
        margin=e.margin, exploit_top=e.exploit_top, perturb=tuple(e.perturb),
        factors=tuple(e.perturb_factors), seed=config.run.seed,
    )


def check_population(config: ExperimentConfig) -> None:
    """run.resume= of an ensemble: ConfigError now if its leaderboard is of another population (the
    members' checkpoints are checked with every other trainer's: srl.launch.run)."""
    run_dir = Path(str(config.run.run_dir))
    if (run_dir / leaderboard.JSON_NAME).is_file():
        population = leaderboard.read(run_dir)["population"]
        if population != config.pod.ensemble.population:
            raise ConfigError(f"field 'pod.ensemble.population': the run resumed from {str(run_dir)!r} has "
                              f"{population} members, not {config.pod.ensemble.population}")


class PopulationManager:
    """Takes the members' evaluations from their reports; decides the leaderboard and adopts."""

    def __init__(self, config: ExperimentConfig, started_s: float) -> None:
        self.run_dir = Path(str(config.run.run_dir))
        with failing_as(self.run_dir / leaderboard.FOLDER):  # a full disk at start: one line (srl.launch.run)
            (self.run_dir / leaderboard.FOLDER).mkdir(parents=True, exist_ok=True)
        self.tournament = make_tournament(config)
        self.started_s = started_s  # entries' time_s: a resumed run counts on from its latest entry
        self.adopts: dict[int, dict[str, Any]] = {}  # member -> its latest adopt command
        if config.run.resume is not None and (self.run_dir / leaderboard.JSON_NAME).is_file():
            self._restore(leaderboard.read(self.run_dir))
        self.outbox: dict[int, dict[str, Any]] = {}
        self.sent_s: dict[int, float] = {}
        leaderboard.write(self.run_dir, self.tournament.table())

    def _restore(self, table: dict[str, Any]) -> None:
        """A resumed run: its tournament, and each member's latest adopt (sent again to a member
        whose checkpoint predates it)."""
        self.tournament.restore(table)
        self.started_s -= max((e["time_s"] for e in table["entries"]), default=0.0)
        for r in table["replacements"]:
            adopt = self._adopt(r["member"], r["hparams"])
            if adopt is not None:
                self.adopts[r["member"]] = adopt

    def _adopt(self, k: int, hparams: dict[str, float]) -> dict[str, Any] | None:
        """Member k's next adopt command (its adoptions are numbered from 1), with the weights of its
        private copy (None where a resumed run has lost it)."""
        n = self.adopts.get(k, {}).get("adoption", 0) + 1
        copy = adopt_path(self.run_dir, k)
        if not copy.is_file():
            return None
        return {"type": "adopt", "adoption": n, "state": copy.read_bytes(), "hparams": hparams}

    def on_report(self, observed: ObservedReport) -> None:
        if observed.role != Role.POD:
            return
        k, report = observed.index, observed.as_type(PodReport)
        for event in report.get(Key.EVALS, []):
            self.on_eval(k, event)
        adopt = self.adopts.get(k)
        waited_s = time.monotonic() - self.sent_s.get(k, -math.inf)
        if adopt is not None and report.get(Key.ADOPTIONS, 0) < adopt["adoption"] and waited_s >= RESEND_S:
            self.outbox[k] = adopt

    def on_eval(self, k: int, event: MemberEval) -> None:
        if event[Key.ADOPTIONS] < self.adopts.get(k, {}).get("adoption", 0):
            return  # evaluated before its replacement arrived: stale
        kept = leaderboard.entry_path(self.run_dir, k, event[Key.ENV_STEPS])
        entry = Entry(k, event[Key.ENV_STEPS], event[Key.EVAL_RETURN], event[Key.HPARAMS], str(kept),
                      time_s=round(time.time() - self.started_s, 3))
        decision = self.tournament.on_eval(entry)
        for old in decision.evicted:
            Path(old.checkpoint).unlink(missing_ok=True)
        if decision.admitted:
            write_bytes_atomic(kept, event[Key.STATE])  # the weights came with the report
        if decision.replace is not None:
            # a private copy: the leaderboard may evict the source before the member loads it
            copy = adopt_path(self.run_dir, k)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(decision.replace.source.checkpoint, copy)
            adopt = self._adopt(k, decision.replace.hparams)
            assert adopt is not None  # its copy was just made
            self.adopts[k] = self.outbox[k] = adopt
        leaderboard.write(self.run_dir, self.tournament.table())

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]:
        """The adopts to send now, as (member, command)."""
        out = list(self.outbox.items())
        self.outbox.clear()
        for k, _ in out:
            self.sent_s[k] = time.monotonic()
        return out

    def on_metrics(self) -> dict[str, Any]:
        return {}  # leaderboard.json is written on every change

    def on_finish(self) -> None:
        """The leaderboard once more, and its best entry as the run's checkpoint (srl eval)."""
        table = self.tournament.table()
        leaderboard.write(self.run_dir, table)
        leaderboard.export_best(self.run_dir, table)


def adopt_path(run_dir: Path, k: int) -> Path:
    """The controller's private copy of the weights member k adopts last (resent from it on resume)."""
    return member_folder(run_dir, k) / ADOPT_FILE


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """`data` as the file `path`, whole or not at all (srl.storage)."""
    with atomic_file(path) as f:
        f.write(data)
