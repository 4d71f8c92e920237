"""srl's side, run with the system python and this checkout (PYTHONPATH) as a subprocess.

Sampling: `srl bench sampling ENV_ID stop.time_limit_s=S`, its last JSON line. Training:
`srl run EXPERIMENT stop.total_env_steps=N stop.target_return=null`, the rate read from the run's
metrics.jsonl between the first report with env steps and the last (start-up left out, as
`srl bench` does); summary.json's env steps and wall time (launch to exit) come along.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import REPO, repo_first_path, run_child

ENV_IDS = {"cartpole": "CartPole-v1", "pong": "ALE/Pong-v5"}
EXPERIMENTS = {"cartpole": "cartpole-ppo", "pong": "pong-ppo"}
# the peers step ALE/Pong-v5 as it comes, sticky actions (0.25) on; pong-ppo turns them off
SAME_ENV_AS_PEERS = {"pong": ["env_kwargs.repeat_action_probability=0.25"]}


def sample(env: str, seconds: float, timeout_s: float = 300) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "srl.cli", "bench", "sampling", ENV_IDS[env], f"stop.time_limit_s={seconds}"]
    result = run_child(cmd, timeout_s, env={"PYTHONPATH": repo_first_path()}, cwd=REPO)
    result.pop("time_breakdown", None)  # per-worker detail: too long for the one-line report
    return result


def has_experiment(name: str) -> bool:
    """Whether this checkout's srl registers `name` (asked of `srl list`, in a subprocess)."""
    done = subprocess.run([sys.executable, "-m", "srl.cli", "list"], cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": repo_first_path()})
    # a table: a header row, then one experiment per row, its name first (then a blank line and the
    # other registries' lines)
    rows = done.stdout.split("\n\n", 1)[0].splitlines()[1:]
    return name in [row.split()[0] for row in rows if row.strip()]


def rate_from_metrics(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """env steps/s between the first report with env steps and the last report."""
    rows = [x for x in lines if isinstance(x.get("env_steps"), (int, float)) and isinstance(x.get("time_s"), (int, float))]
    started = next((x for x in rows if x["env_steps"] > 0), None)
    if started is None or rows[-1] is started:
        return {"error": "fewer than two reports with env steps in metrics.jsonl"}
    last = rows[-1]
    seconds = last["time_s"] - started["time_s"]
    steps = last["env_steps"] - started["env_steps"]
    return {"env_steps_per_s": round(steps / seconds, 1) if seconds > 0 else None,
            "measured_s": round(seconds, 3), "env_steps": last["env_steps"]}


def train_overrides(env: str, env_steps: int, run_dir: Path, overrides: list[str] | None = None) -> list[str]:
    """The `key=value` arguments of srl's training run: the budget, no target, the peers' env."""
    return [f"stop.total_env_steps={env_steps}", "stop.target_return=null", "monitor.display=off", "monitor.learning_curve=false",
            f"run.run_dir={run_dir}", "run.seed=1", *SAME_ENV_AS_PEERS.get(env, []), *(overrides or [])]


def train(env: str, env_steps: int, timeout_s: float = 900, overrides: list[str] | None = None) -> dict[str, Any]:
    experiment = EXPERIMENTS[env]
    if not has_experiment(experiment):
        return {"skipped": f"srl has no experiment {experiment!r} in this checkout"}
    with tempfile.TemporaryDirectory(prefix="srl-peers-run-") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, "-m", "srl.cli", "run", experiment, *train_overrides(env, env_steps, run_dir, overrides)]
        done = run_child(cmd, timeout_s, env={"PYTHONPATH": repo_first_path()}, cwd=REPO)
        metrics = run_dir / "metrics.jsonl"
        if not metrics.exists():
            return {"error": done.get("error", "no metrics.jsonl")}
        lines = []
        for line in metrics.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        result = rate_from_metrics(lines)
        summary_path = run_dir / "summary.json"
        if summary_path.exists():
            summary = json.loads(summary_path.read_text())
            # worker_busy_s: which worker set the pace (on a GPU, the actors or the policy worker?)
            keys = ("env_steps", "wall_time_s", "stop_reason", "error", "devices", "worker_busy_s")
            result["summary"] = {k: summary.get(k) for k in keys}
        return {"experiment": experiment, "overrides": overrides or [], **result}
