"""What a sweep leaves: results.csv and results.md (one row per trial, best first) and best.yaml,
the best trial's config as an experiment file (`srl run SWEEP_DIR/best.yaml`)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import yaml

from srl.config import RESET, Replace, parse_overrides
from srl.config.files import BASE, REPLACE_TAG, is_experiment_file
from srl.storage import write_text_atomic
from srl.sweep.spec import SweepSpec, override_text
from srl.sweep.study import INTERRUPTED

BEST_FILE = "best.yaml"
SUMMARY_COLUMNS = ("env_steps", "episode_return_mean", "time_to_target_s", "wall_time_s")


def rows(study: Any, spec: SweepSpec) -> list[dict[str, Any]]:
    """One row per ended trial: completed ones best first, then pruned, then failed."""
    from optuna.trial import TrialState

    order = {TrialState.COMPLETE: 0, TrialState.PRUNED: 1, TrialState.FAIL: 2}
    sign = 1 if spec.best_direction == "minimize" else -1
    ended = [t for t in study.get_trials(deepcopy=False) if t.state in order]
    ended.sort(key=lambda t: (order[t.state], sign * t.value if t.state == TrialState.COMPLETE else 0.0, t.number))
    out = []
    for t in ended:
        state = t.state.name.lower()
        if t.user_attrs.get(INTERRUPTED):
            state = "interrupted"
        summary = t.user_attrs.get("summary") or {}
        value = t.value if t.state == TrialState.COMPLETE else None  # a pruned trial's is its last return
        row = {"trial": t.number, "state": state, spec.objective + " (objective)": _num(value)}
        if t.user_attrs.get("baseline"):
            row["state"] += " (baseline)"
        row.update({key: _num(value) for key, value in (t.user_attrs.get("values") or t.params).items()})
        row.update({key: _num(summary.get(key)) for key in SUMMARY_COLUMNS})
        row["run_dir"] = t.user_attrs.get("run_dir", "")
        out.append(row)
    return out


def _num(value: Any) -> Any:
    if isinstance(value, float):
        return "inf" if math.isinf(value) else float(f"{value:.4g}")
    return "" if value is None else value


def columns(table: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for row in table:
        names.extend(key for key in row if key not in names)
    return names


def text_table(table: list[dict[str, Any]]) -> str:
    if not table:
        return "no trial has ended yet"
    names = columns(table)
    cells = [names, *[[str(row.get(n, "")) for n in names] for row in table]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(names))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def markdown_table(table: list[dict[str, Any]]) -> str:
    names = columns(table)
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(str(row.get(n, "")) for n in names) + " |" for row in table]
    return "\n".join(lines) + "\n"


def write_tables(sweep_dir: Path, table: list[dict[str, Any]]) -> None:
    names = columns(table)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=names)
    writer.writeheader()
    writer.writerows(table)
    write_text_atomic(sweep_dir / "results.csv", buffer.getvalue())
    write_text_atomic(sweep_dir / "results.md", markdown_table(table) if table else "no trial has ended yet\n")


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(Replace, lambda d, r: _represent_replace(d, r.value))
_Dumper.add_representer(type(RESET), lambda d, _: d.represent_none(None))


def _represent_replace(dumper: yaml.SafeDumper, value: Any) -> yaml.Node:
    if isinstance(value, dict):
        return dumper.represent_mapping(REPLACE_TAG, value)
    if isinstance(value, list):
        return dumper.represent_sequence(REPLACE_TAG, value)
    return dumper.represent_scalar(REPLACE_TAG, "null" if value is None else yaml.safe_dump(value).split("\n")[0])


def write_best(sweep_dir: Path, study: Any, spec: SweepSpec, experiment: str, extra: list[str]) -> Path | None:
    """best.yaml: the built-in experiment as `base:` with the sweep's fixed overrides, the best
    trial's values and its seed over it; for an experiment file, the best trial's saved config."""
    from optuna.trial import TrialState

    done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE and t.value is not None]
    if not done:
        return None
    best = min(done, key=lambda t: t.value if spec.best_direction == "minimize" else -t.value)
    path = sweep_dir / BEST_FILE
    header = (f"# best of {len(done)} completed trials of sweep {sweep_dir}: trial {best.number}, "
              f"{spec.objective}={best.value}\n# run it: srl run {path}\n")
    if is_experiment_file(experiment):
        saved = Path(best.user_attrs["run_dir"]) / "config.yaml"
        write_text_atomic(path, header + saved.read_text())
        return path
    values = best.user_attrs.get("values") or best.params
    items = [*spec.overrides, *extra, *(override_text(k, v) for k, v in values.items()),
             f"run.seed={best.user_attrs.get('seed', spec.seed)}"]
    tree = {BASE: experiment, **parse_overrides(items)}
    write_text_atomic(path, header + yaml.dump(tree, Dumper=_Dumper, sort_keys=False, default_flow_style=False))
    return path

