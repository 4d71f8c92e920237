"""Both bars of mpe-tag on the built-in (1M env steps, two actors), seed by seed: the figures of
docs/results.md and docs/multiagent.md.

    python benchmarks/mpe_tag_bars.py --seeds 1 2 3

Per seed, `srl run mpe-tag run.seed=N launch.num_actor_workers=2` (the built-in's whole budget,
about 11 minutes on an idle 2-core machine), then `srl eval RUN --against random --episodes 1000`
(eval seed 12345, the default). The bars, those tests/test_policies.py held in CI on seed 1 until
the run made CI 13 minutes longer (its CI test now trains a shorter, lock-step run):

- predators: trained predators score more than 3 times what random predators score on random prey
  (`predator.return_mean > 3 * predator.random_return_mean`; a predator scores 10 per touch);
- prey: random predators touch the trained prey less often than they touch random prey
  (`prey.opponents.predator.return_mean < predator.random_return_mean`); at 400k env steps it was
  not yet (docs/multiagent.md), so only the whole budget shows it.

Progress goes to stderr; standard output gets ONE JSON line; the exit status is 1 when a seed
misses a bar.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PREDATOR_OVER_RANDOM = 3.0  # trained predators' return over random predators', on random prey


def srl(*args: str, timeout_s: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "srl.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout_s, check=True)


def bars(scores: dict) -> dict:
    """The two bars of one evaluated run, from `srl eval --against random`'s policies."""
    random_on_random = scores["predator"]["random_return_mean"]  # random predators on random prey
    random_on_trained_prey = scores["prey"]["opponents"]["predator"]["return_mean"]
    return {
        "trained_predators": scores["predator"]["return_mean"],
        "random_predators_on_random_prey": random_on_random,
        "random_predators_on_trained_prey": random_on_trained_prey,
        "predator_ratio": round(scores["predator"]["return_mean"] / random_on_random, 3),
        "prey_touch_ratio": round(random_on_trained_prey / random_on_random, 3),
        "predators_pass": scores["predator"]["return_mean"] > PREDATOR_OVER_RANDOM * random_on_random,
        "prey_pass": random_on_trained_prey < random_on_random,
    }


def run_seed(seed: int, run_dir: Path, episodes: int, overrides: list[str], timeout_s: float) -> dict:
    started = time.time()
    srl("run", "mpe-tag", f"run.seed={seed}", "launch.num_actor_workers=2", "monitor.display=off",
        f"run.run_dir={run_dir}", *overrides, timeout_s=timeout_s)
    trained = time.time()
    evaluated = srl("eval", str(run_dir), "--against", "random", "--episodes", str(episodes), timeout_s=timeout_s)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"seed": seed, "env_steps": summary["env_steps"], "train_s": round(trained - started, 1),
            "eval_s": round(time.time() - trained, 1), **bars(json.loads(evaluated.stdout)["policies"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="key=value config overrides (before the options)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--episodes", type=int, default=1000, help="eval episodes of each side (default 1000)")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="limit of each run and each eval")
    parser.add_argument("--keep", type=Path, help="keep each run dir as DIR/mpe-tag-sN")
    args = parser.parse_args()

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            result = run_seed(seed, (args.keep or Path(tmp)) / f"mpe-tag-s{seed}", args.episodes, args.overrides,
                              args.timeout_s)
            print(json.dumps(result), file=sys.stderr)
            runs.append(result)
    print(json.dumps({
        "benchmark": "mpe_tag_bars", "overrides": args.overrides, "seeds": args.seeds, "episodes": args.episodes,
        "all_pass": all(r["predators_pass"] and r["prey_pass"] for r in runs), "runs": runs,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "loadavg_at_end": os.getloadavg()},
    }))
    sys.exit(0 if all(r["predators_pass"] and r["prey_pass"] for r in runs) else 1)


if __name__ == "__main__":
    main()
