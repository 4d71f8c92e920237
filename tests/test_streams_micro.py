"""benchmarks/streams_micro.py runs end to end on every backend: it drives the real stream classes by
hand, so a change to their protocol (a request key the server dedups on, a stream renamed in the
graph) breaks it where no run would notice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_backend_round_trips_and_hands_over_segments():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "streams_micro.py"), "--repeats", "1", "--seconds", "0.4"],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(figures["backends"]) == {"inline", "shm", "tcp"}
    for backend in figures["backends"].values():
        assert backend["rtt_us_median"] > 0 and backend["msgs_per_s"] > 0
