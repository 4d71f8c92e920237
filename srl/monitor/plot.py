"""Learning curve of a run: mean-100 episode return against env steps and against wall time.

    plot_learning_curve(run_dir)  # reads run_dir/metrics.jsonl, writes run_dir/learning_curve.png

Needs matplotlib (`pip install 'srl[plot]'`). Reports without a return yet (no episode finished)
are skipped; `eval/episode_return_mean` (evaluation episodes, deterministic actions) is drawn
too when the run has it.
"""

from __future__ import annotations

import json
from pathlib import Path

from srl.monitor.recorder import METRICS_FILE

CURVE_FILE = "learning_curve.png"
SERIES = (("episode_return_mean", "training episodes (mean of last 100)"),
          ("eval/episode_return_mean", "evaluation episodes (deterministic)"))


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def read_curves(metrics_path: Path) -> dict[str, list[tuple[float, float, float]]]:
    """metric -> [(env_steps, time_s, value)] for each metric of SERIES that has values.

    A resumed run appends to the same file, its `time_s` counting from its own launch: each launch
    after the first is shifted to start where the one before ended, so time runs on."""
    curves: dict[str, list[tuple[float, float, float]]] = {name: [] for name, _ in SERIES}
    offset_s = last_s = 0.0
    for line in metrics_path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        time_s = float(row.get("time_s", 0.0))
        if time_s < last_s:  # a resumed launch's clock started again
            offset_s += last_s
        last_s = time_s
        for name, points in curves.items():
            if row.get(name) is not None and row.get("env_steps") is not None:
                points.append((float(row["env_steps"]), offset_s + time_s, float(row[name])))
    return {name: points for name, points in curves.items() if points}


def plot_learning_curve(run_dir: str | Path, target: float | None = None) -> Path | None:
    """Write run_dir/learning_curve.png; None when the run has no episode return to draw."""
    run_dir = Path(run_dir)
    metrics = run_dir / METRICS_FILE
    curves = read_curves(metrics) if metrics.is_file() else {}
    if not curves:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable("the learning curve needs matplotlib: pip install 'srl[plot]'") from None

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for column, (axis, xlabel) in enumerate(zip(axes, ("env steps", "wall time (s)"))):
        for name, label in SERIES:
            if name in curves:
                xs = [point[column] for point in curves[name]]
                axis.plot(xs, [point[2] for point in curves[name]], label=label)
        if target is not None:
            axis.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:g}")
        axis.set_xlabel(xlabel)
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("episode return")
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(run_dir.name)
    fig.tight_layout()
    path = run_dir / CURVE_FILE
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
