"""benchmarks/ingest.py and benchmarks/scale_model.py run end to end at tiny sizes: ingest drives
the real tcp stream classes (a renamed stream or a moved call site of the wire's signing breaks
it), and the model's output keeps its shape and its minimum law. No speeds are asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(script: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], env=env,
                          capture_output=True, text=True, timeout=240, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ingest_measures_both_sides_and_splits_their_time(tmp_path):
    figures = run("ingest.py", "--sizes", "16", "2048", "--seconds", "0.3", "--feeders", "1", "--segment-steps", "4")
    assert set(figures["by_obs_bytes"]) == {"trainer", "policy"}
    for side in figures["by_obs_bytes"].values():
        assert set(side) == {"16", "2048"}
        for r in side.values():
            assert r["env_steps_per_s"] > 0 and r["env_steps_per_cpu_s"] > 0
            assert set(r["shares"]) == {"hmac", "integrity", "copy", "other"}
            # every message is verified and copied where it is received: the timers must see both
            assert r["shares"]["hmac"] > 0 and r["shares"]["copy"] > 0 and r["shares"]["integrity"] > 0
            assert abs(sum(r["shares"].values()) - 1) < 0.01
    (tmp_path / "ingest.jsonl").write_text(json.dumps(figures) + "\n")
    model = run("scale_model.py", "--ingest", str(tmp_path / "ingest.jsonl"), "--cores", "10", "100")
    assert model["constants"]["ingest_env_steps_per_cpu_s"]["trainer"]["16"] == figures["by_obs_bytes"]["trainer"]["16"]["env_steps_per_cpu_s"]


def test_scale_model_takes_the_minimum_over_its_stages():
    model = run("scale_model.py", "--cores", "100", "1000", "10000")
    assert set(model["predictions"]) == {"atari", "hide_and_seek"}
    for config in model["predictions"].values():
        assert set(config) == {"100", "1000", "10000"}
        for p in config.values():
            stages = {s: v for s, v in p["stages"].items() if v is not None}
            assert set(p["stages"]) == set(model["stages"]) and p["binding"] in model["stages"]
            assert p["env_steps_per_s"] == min(stages.values()) == stages[p["binding"]]
            assert p["without_freshness"] >= p["env_steps_per_s"]
    check = model["check"]
    assert set(check["points"]) == {"local", "ray"} and check["all_checked"]["of"] > 0
    for points in check["points"].values():
        for p in points.values():
            assert p["binding"] in ("actors", "host_cpu")
            assert p["error"] == round(p["predicted"] / p["measured"] - 1, 3)


def test_the_model_s_controller_stage_takes_controller_soak_s_measured_cost_a_report(tmp_path):
    soak = run("controller_soak.py", "--workers", "64", "--processes", "1", "--warmup-s", "2", "--steady-s", "1",
               "--after-s", "0.5")  # fmt: skip
    us = soak["runs"][0]["us_per_report"]
    (tmp_path / "soak.jsonl").write_text(json.dumps(soak) + "\n")
    model = run("scale_model.py", "--controller-soak", str(tmp_path / "soak.jsonl"), "--cores", "10")
    constants = model["constants"]
    assert constants["controller_us_per_report"] == round(us, 1) and "64 workers" in constants["controller_source"]
    assert constants["controller_workers"] == round(1e6 / (us * 2)), constants
