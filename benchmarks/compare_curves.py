"""Learning curves of several experiments on one env, side by side: the mpe-spread-qmix figure of
docs/multiagent.md (QMIX, VDN and MAPPO on simple_spread).

    python benchmarks/learning_results.py mpe-spread-qmix stop.total_env_steps=150000 --seeds 1 2 3 --keep runs/qmix
    python benchmarks/compare_curves.py qmix=runs/qmix vdn=runs/vdn mappo=runs/mappo --out curves.png

Each LABEL=DIR names a directory of runs (learning_results.py --keep) or one run. For each label:
the training return (mean of the last 100 episodes) of every run, its median over runs at the
same env steps (each run's last report at or before them), and the median of the runs' final
returns. Standard output gets ONE JSON line; `--out` draws the medians (matplotlib).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from srl.monitor.plot import read_curves  # noqa: E402
from srl.monitor.recorder import METRICS_FILE  # noqa: E402


def runs_of(path: Path) -> list[Path]:
    return [path] if (path / METRICS_FILE).is_file() else sorted(p.parent for p in path.glob(f"*/{METRICS_FILE}"))


def curve(run: Path) -> list[tuple[float, float]]:
    return [(steps, value) for steps, _, value in read_curves(run / METRICS_FILE).get("episode_return_mean", [])]


def at(points: list[tuple[float, float]], steps: float) -> float | None:
    """The last value reported at or before `steps`."""
    before = [value for s, value in points if s <= steps]
    return before[-1] if before else None


def median_curve(curves: list[list[tuple[float, float]]], grid: list[float]) -> list[tuple[float, float]]:
    out = []
    for steps in grid:
        values = [v for c in curves if (v := at(c, steps)) is not None]
        if len(values) == len(curves):
            out.append((steps, statistics.median(values)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="LABEL=DIR")
    parser.add_argument("--every", type=float, default=10_000, help="env steps between the medians' points")
    parser.add_argument("--out", type=Path, help="draw the median curves into this PNG")
    args = parser.parse_args()
    figures, medians = {}, {}
    for entry in args.runs:
        label, _, directory = entry.partition("=")
        curves = [c for c in map(curve, runs_of(Path(directory))) if c]
        if not curves:
            raise SystemExit(f"{entry}: no run with an episode return under {directory}")
        end = min(c[-1][0] for c in curves)
        grid = [args.every * k for k in range(1, int(end // args.every) + 1)]
        medians[label] = median_curve(curves, grid)
        finals = [c[-1][1] for c in curves]
        figures[label] = {"runs": len(curves), "env_steps": int(end), "final_returns": [round(f, 2) for f in finals],
                          "final_median": round(statistics.median(finals), 2)}
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4))
        for label, points in medians.items():
            ax.plot([s for s, _ in points], [v for _, v in points], label=f"{label} (median of {figures[label]['runs']})")
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return (mean of last 100)")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.out, dpi=100)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
