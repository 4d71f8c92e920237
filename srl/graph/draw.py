"""Draw a built graph: workers as boxes in dataflow order, declared streams as arrows.

Needs matplotlib (`pip install 'srl[plot]'`); the format follows the file's extension.
"""

from __future__ import annotations

from pathlib import Path

from srl.config import ConfigError
from srl.graph import Graph

# the buffer sits below the policy workers, between the actors and the trainer; extra workers
# (srl.api.worker) below the trainers
COLUMNS = {"actor": 0.0, "eval": 0.0, "policy": 1.0, "params": 1.0, "buffer": 1.0, "trainer": 2.0, "controller": 2.0,
           "custom": 2.0}
COLORS = {"actor": "#cfe2f3", "policy": "#d9ead3", "trainer": "#fce5cd", "params": "#fff2cc", "controller": "#eeeeee",
          "eval": "#ead1dc", "buffer": "#ead1dc", "custom": "#d0e0e3"}
FORMATS = (".png", ".svg", ".pdf")


def _positions(graph: Graph) -> dict[str, tuple[float, float]]:
    names = [w.name for w in graph.workers] + ["controller"]
    by_role: dict[str, list[str]] = {}
    for name in names:
        by_role.setdefault(name.split(":")[0], []).append(name)
    tall = max(len(v) for v in by_role.values())
    tops = {"params": -1.5, "controller": tall + 0.5, "eval": tall + 0.5, "buffer": tall + 0.25, "custom": tall + 1.5}
    pos = {}
    for role, members in by_role.items():
        top = tops.get(role, (tall - len(members)) / 2)
        for i, name in enumerate(members):
            pos[name] = (COLUMNS[role], top + i)
    return pos


def draw(graph: Graph, path: Path) -> None:
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"--out {str(path)!r}: the extension must be one of {', '.join(FORMATS)}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("drawing needs matplotlib: pip install 'srl[plot]'") from None
    pos = _positions(graph)
    low, high = min(y for _, y in pos.values()), max(y for _, y in pos.values())
    fig, ax = plt.subplots(figsize=(9, max(3.5, 0.8 * (high - low + 2))))
    labelled = set()  # one label per kind of stream: a kind's streams run between like workers
    for stream in graph.streams:
        control = stream.kind == "control"
        for src in stream.producers:
            for dst in stream.consumers:
                ax.annotate(
                    "", xy=pos[dst], xytext=pos[src],
                    arrowprops=dict(arrowstyle="->", color="#bbbbbb" if control else "#444444",
                                    lw=0.6 if control else 1.2, shrinkA=22, shrinkB=22, connectionstyle="arc3,rad=0.08"),
                )
        if not control and stream.kind not in labelled:
            labelled.add(stream.kind)
            (x0, y0), (x1, y1) = pos[stream.producers[-1]], pos[stream.consumers[0]]
            at = 0.75 if x1 - x0 > 1.5 else 0.5  # long arrows pass behind the middle column's boxes
            ax.text(x0 + at * (x1 - x0), y0 + at * (y1 - y0) + 0.18, f"{stream.name}\n{stream.payload}",
                    ha="center", fontsize=7, color="#333333")
    for name, (x, y) in pos.items():
        role = name.split(":")[0]
        ax.text(x, y, name, ha="center", va="center", fontsize=9,
                bbox=dict(boxstyle="round,pad=0.5", fc=COLORS[role], ec="#666666"))
    ax.set_xlim(-0.6, 2.6)
    ax.set_ylim(low - 1, high + 1)
    ax.invert_yaxis()
    ax.axis("off")
    ax.set_title(f"{graph.config.experiment}: {graph.config.env}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
