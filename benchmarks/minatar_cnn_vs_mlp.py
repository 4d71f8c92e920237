"""MinAtar Breakout: the default policy (multi-input's CNN over the 0/1 grid) against the MLP over
the flattened grid, same PPO settings, same seed, same env steps (issue 37).

    python benchmarks/minatar_cnn_vs_mlp.py --env-steps 400000 --seed 1 --out docs/results/minatar-breakout.jsonl
    python benchmarks/minatar_cnn_vs_mlp.py --env-steps 400000 --stop-env-steps 240000 --only mlp_flat

Each side is `srl run cartpole-ppo env=minatar_env:MinAtar/Breakout-v1 ...` with the PPO settings
below (tests/minatar_env.py registers MinAtar's ids: it does so only when called). The CNN side
leaves `policy` at auto; the MLP side sets policy=actor-critic-mlp. Prints ONE JSON line (and
appends it to --out): per side the mean return of the last 100 episodes at the end, at each
quarter of the budget, and the wall time. Not a test: run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = "minatar_env:MinAtar/Breakout-v1"
PPO = [  # 8 envs x 128 steps per update, 4 epochs of 4 minibatches, lr 5e-4 annealed to 0
    "dataflow.envs_per_actor=8", "dataflow.sample_length=128", "algo.lr=5e-4", "algo.epochs=4",
    "algo.num_minibatches=4", "algo.gamma=0.99", "algo.gae_lambda=0.95",
    "algo.final_lr_fraction=0.0", "stop.target_return=null", "monitor.display=off",
]
SIDES = {"cnn_default": [], "mlp_flat": ["policy=actor-critic-mlp"]}


def run_side(name: str, extra: list[str], env_steps: int, stop_env_steps: int, seed: int, work: Path) -> dict:
    """One side's run: lr annealed over `env_steps`, stopped at `stop_env_steps` (the same or fewer)."""
    run_dir = work / name
    cmd = [sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", f"env={ENV}", f"stop.total_env_steps={stop_env_steps}",
           f"algo.anneal_env_steps={env_steps}", f"run.seed={seed}", f"run.run_dir={run_dir}", *PPO, *extra]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    started = time.time()
    done = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
    wall_s = time.time() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: srl run exited {done.returncode}:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if r.get("episode_return_mean") is not None]
    at = {}
    for quarter in (1, 2, 3, 4):
        mark = stop_env_steps * quarter // 4
        before = [r for r in rows if r["env_steps"] <= mark]
        at[str(mark)] = round(before[-1]["episode_return_mean"], 2) if before else None
    summary = json.loads((run_dir / "summary.json").read_text())
    policy = yaml.safe_load((run_dir / "config.yaml").read_text())["policy"]  # as the run chose it
    return {"policy": policy, "return_last100": summary["episode_return_mean"], "return_at_env_steps": at,
            "env_steps": summary["env_steps"], "wall_s": round(wall_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-steps", type=int, default=400_000)
    parser.add_argument("--stop-env-steps", type=int, help="stop here, lr still annealed over --env-steps "
                        "(the curve of a longer run, cut short)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", choices=sorted(SIDES))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    stop = args.stop_env_steps or args.env_steps
    result: dict = {"benchmark": "minatar_cnn_vs_mlp", "env": "MinAtar/Breakout-v1", "seed": args.seed,
                    "env_steps": stop, "lr_annealed_over_env_steps": args.env_steps, "ppo": PPO, "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory(prefix="srl-minatar-") as work:
        for name, extra in SIDES.items():
            if args.only in (None, name):
                result[name] = run_side(name, extra, args.env_steps, stop, args.seed, Path(work))
    line = json.dumps(result)
    print(line)
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
