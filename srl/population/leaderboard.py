"""The leaderboard of an ensemble run, on disk: run_dir/leaderboard.json (+ .csv), checkpoints in
run_dir/leaderboard/, and `srl leaderboard RUN_DIR` to print it.

leaderboard.json is `srl.population.tournament.Tournament.table()`: "entries" (best first: member,
env_steps, eval_return, hparams, checkpoint, time_s, lineage), "replacements" and "members".
leaderboard.csv holds the entries only, one row each, hyperparameters as `hp.<name>` columns.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

from srl import checkpoint
from srl.population.pool import render_table, write_json
from srl.storage import write_text_atomic

JSON_NAME = "leaderboard.json"
CSV_NAME = "leaderboard.csv"
FOLDER = "leaderboard"


def entry_path(run_dir: Path, member: int, env_steps: int) -> Path:
    """A new file for member's evaluation at env_steps. A restarted member evaluates again at the
    env steps of its earlier life's evaluations, whose files may still be entries: each keeps its own."""
    stem, n = f"m{member}-{env_steps:010d}", 1
    path = Path(run_dir) / FOLDER / f"{stem}.pt"
    while path.exists():
        n += 1
        path = path.with_name(f"{stem}-{n}.pt")
    return path


def write(run_dir: Path, table: dict[str, Any]) -> None:
    """leaderboard.json and leaderboard.csv from a `Tournament.table()`."""
    run_dir = Path(run_dir)
    write_json(run_dir / JSON_NAME, table)
    names = sorted({k for e in table["entries"] for k in e["hparams"]})
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["rank", "member", "env_steps", "eval_return", *[f"hp.{n}" for n in names],
                     "checkpoint", "time_s", "lineage"])
    for rank, e in enumerate(table["entries"], 1):
        writer.writerow([rank, e["member"], e["env_steps"], e["eval_return"],
                         *[e["hparams"].get(n) for n in names], e["checkpoint"], e["time_s"], e["lineage"]])
    write_text_atomic(run_dir / CSV_NAME, out.getvalue())


def read(run_dir: Path | str) -> dict[str, Any]:
    path = Path(run_dir) / JSON_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{str(run_dir)!r} has no {JSON_NAME} (not an ensemble run directory?)")
    return json.loads(path.read_text())


def export_best(run_dir: Path, table: dict[str, Any]) -> None:
    """Make the best entry the run's latest checkpoint, so `srl eval RUN_DIR` runs it."""
    if not table["entries"]:
        return
    best = table["entries"][0]
    folder = checkpoint.checkpoint_dir(run_dir)
    folder.mkdir(parents=True, exist_ok=True)
    name = f"ckpt-best-m{best['member']}-{best['env_steps']:010d}.pt"
    shutil.copyfile(best["checkpoint"], folder / name)
    meta = {"path": name, "version": None, "env_steps": best["env_steps"], "member": best["member"]}
    write_text_atomic(folder / checkpoint.LATEST, json.dumps(meta))


def render(table: dict[str, Any]) -> Any:
    """A rich Table of the entries, best first, with the replacements counted in the caption."""
    names = sorted({k for e in table["entries"] for k in e["hparams"]})
    rows = [[str(rank), f"m{e['member']}", str(e["env_steps"]), f"{e['eval_return']:.2f}",
             *[f"{e['hparams'][n]:.3g}" if n in e["hparams"] else "" for n in names],
             str(e["lineage"]), Path(e["checkpoint"]).name]
            for rank, e in enumerate(table["entries"], 1)]
    return render_table(f"leaderboard: population {table['population']}", f"{len(table['replacements'])} replacement(s)",
                        ("rank", "member", "env steps", "eval return", *names, "lineage", "checkpoint"), rows,
                        left=("lineage", "checkpoint"))
