"""benchmarks/compare_curves.py: each label's runs found, their medians at the same env steps, and
one JSON line of final returns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "compare_curves.py"


def write_run(run: Path, points: list[tuple[int, float | None]]) -> None:
    run.mkdir(parents=True)
    lines = [json.dumps({"env_steps": s, "episode_return_mean": r, "time_s": i}) for i, (s, r) in enumerate(points)]
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_medians_at_the_same_env_steps_and_the_final_returns(tmp_path):
    write_run(tmp_path / "a" / "s1", [(500, None), (900, -30.0), (2100, -20.0)])
    write_run(tmp_path / "a" / "s2", [(1000, -26.0), (1900, -10.0), (2500, -12.0)])
    write_run(tmp_path / "b", [(1000, 5.0), (2000, 7.0)])  # one run, not a directory of runs
    out = subprocess.run([sys.executable, str(BENCH), f"a={tmp_path / 'a'}", f"b={tmp_path / 'b'}", "--every", "1000"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == 1
    figures = json.loads(out[0])
    assert figures["a"] == {"runs": 2, "env_steps": 2100, "final_returns": [-20.0, -12.0], "final_median": -16.0}
    assert figures["b"]["final_median"] == 7.0

    sys.path.insert(0, str(BENCH.parent))
    from compare_curves import curve, median_curve

    curves = [curve(tmp_path / "a" / "s1"), curve(tmp_path / "a" / "s2")]
    # at 1000: run 1's -30 (reported at 900) and run 2's -26; at 2000: -30 (2100 is later) and -10
    assert median_curve(curves, [1000, 2000]) == [(1000, -28.0), (2000, -20.0)]
