"""The `srl` command: run, show, sweep, eval, graph, list."""

from __future__ import annotations

import time

_STARTED_S = time.time()  # before the heavy imports: `time_s` in metrics counts from here

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    from srl.config import ExperimentConfig


def _cmd_run(args: argparse.Namespace) -> int:
    from srl.config.load import load_config
    from srl.launch.run import run_experiment

    config = load_config(args.experiment, args.overrides)
    return run_experiment(config, started_s=_STARTED_S)


def _cmd_show(args: argparse.Namespace) -> int:
    from srl.config import show_config
    from srl.config.load import load_config

    config = load_config(args.experiment, args.overrides)
    print(show_config(config, changed_only=args.changed), end="")
    print(f"# {_policy_line(config)}")  # a YAML comment: the output stays a config file
    from srl.graph.sizing import choice_lines

    for line in choice_lines(config):
        print(f"# {line}")
    return 0


def _policy_line(config: ExperimentConfig) -> str:
    """Which policy acts and why, from the env's spaces (one env is built, as `srl graph` does)."""
    import gymnasium as gym

    from srl.config import ConfigError
    from srl.envs import describe_spaces
    from srl.graph.default_policy import choose_policy

    if config.policies:
        return "policies: each of `policies` acts as named (srl graph lists them)"
    try:
        _, observation_space, action_space = describe_spaces(config.env, config.env_kwargs, config.env_backend,
                                                             config.env_wrappers)
    except (ConfigError, ImportError, ValueError, TypeError, KeyError, gym.error.Error) as e:
        why = str(e.args[0] if isinstance(e, KeyError) and e.args else e).splitlines()[0]
        return f"policy: {config.policy} (the env could not be built here to choose by its spaces: {why})"
    return choose_policy(config, observation_space, action_space).line()


def _cmd_sweep(args: argparse.Namespace) -> int:
    from srl.sweep.run import run_sweep

    return run_sweep(args.experiment, args.sweep_file, args.dir, args.overrides)


def _cmd_eval(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from srl.evaluation.command import evaluate
    from srl.evaluation.trained import saved_config
    from srl.faults import json_safe

    # It acts as the run's actors did, with their torch threads: at torch's default of one per core
    # the threads only spun on ops this small (10 mpe-tag episodes against random on a loaded 2-core
    # machine: 14.8 s of CPU and 177 s with 2 threads, 1.2 s and 21 s with 1).
    torch.set_num_threads(saved_config(Path(args.run_dir)).threads_for(trains=False))
    result = evaluate(args.run_dir, episodes=args.episodes, seed=args.seed, deterministic=not args.stochastic,
                      against=args.against, games=args.games, snapshot=args.snapshot, video=args.video)
    print(json.dumps(json_safe(result), allow_nan=False))  # strict JSON: a NaN return is null
    return 0


def _cmd_graph(args: argparse.Namespace) -> int:
    from srl.config.load import load_config
    from srl.graph import build_graph

    graph = build_graph(load_config(args.experiment, args.overrides))
    if args.out is None:
        print(graph.describe())
        return 0
    from pathlib import Path

    from srl.graph.draw import draw

    draw(graph, Path(args.out))
    print(f"wrote {args.out}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    import srl.builtins  # noqa: F401
    from srl.api import registry
    from srl.config import ConfigError, ExperimentConfig, import_modules, parse_overrides
    from srl.experiments import experiment_values

    given = parse_overrides(args.overrides)
    if set(given) - {"modules"}:
        raise ConfigError(f"'list' takes only modules=... (got {' '.join(args.overrides)})")
    import_modules(given.get("modules") or [])
    rows: list[tuple[str, ...]] = [("experiment", "env", "algorithm")]
    defaults = ExperimentConfig.model_fields
    for name in registry.experiments.names():
        values = experiment_values(name)
        rows.append((name, *(str(values.get(k, defaults[k].default)) for k in ("env", "algorithm"))))
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    for row in rows:
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]}")
    print()
    tables: dict[str, registry.Registry] = {  # each of its own entry type
        "algorithms": registry.algorithms, "policies": registry.policies, "environments": registry.envs,
    }
    for plural, table in tables.items():
        print(f"{plural}: {', '.join(table.names())}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from srl.bench import bench_sampling

    result = bench_sampling(args.env_id, args.overrides)
    print(json.dumps(result))
    if result["error"]:  # no figure: a rate of 0.0 or null would read as one
        print(f"srl bench: {result['error']}", file=sys.stderr, flush=True)
    return 0 if result["exit_code"] == 0 and not result["error"] else 1


def _cmd_config_doc(args: argparse.Namespace) -> int:
    from srl.config.doc import config_reference

    print(config_reference())
    return 0


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from srl.population import leaderboard, league

    league_file = Path(args.run_dir) / league.FILE
    if league_file.is_file() and not (Path(args.run_dir) / leaderboard.JSON_NAME).is_file():  # a self-play run
        played = league.League.load(league_file)
        if args.json:
            print(json.dumps(played.to_json()))
        else:
            Console(width=max(100, Console().width)).print(league.render(played))
        return 0
    try:
        table = leaderboard.read(args.run_dir)
    except FileNotFoundError as e:
        print(f"srl: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(table))
    else:
        Console(width=max(100, Console().width)).print(leaderboard.render(table))
    return 0


EXPERIMENT_HELP = ("a built-in or registered experiment name (srl list), or an experiment file (.yaml: config keys "
                   "and base: EXPERIMENT; see docs/custom.md)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="srl", description="Reinforcement learning as a dataflow of workers.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train an experiment: srl run EXPERIMENT|FILE.yaml [key=value ...]")
    run.add_argument("experiment", help=EXPERIMENT_HELP)
    run.add_argument("overrides", nargs="*", help="config overrides, e.g. run.seed=3 launch.launcher=inline algo.lr=3e-4")
    run.set_defaults(fn=_cmd_run)
    show = sub.add_parser("show", help="print the config a run would use: srl show EXPERIMENT|FILE.yaml [key=value ...]")
    show.add_argument("experiment", help=EXPERIMENT_HELP)
    show.add_argument("overrides", nargs="*")
    show.add_argument("--changed", action="store_true", help="only the values that differ from the defaults")
    show.set_defaults(fn=_cmd_show)
    sweep = sub.add_parser("sweep", help="search hyperparameters with Optuna: srl sweep EXPERIMENT SWEEP.yaml "
                           "[key=value ...] (docs/sweeps.md)")
    sweep.add_argument("experiment", help=EXPERIMENT_HELP)
    sweep.add_argument("sweep_file", help="the sweep file: objective, trials, parallel, space, pruner (docs/sweeps.md)")
    sweep.add_argument("overrides", nargs="*", help="config overrides of every trial, after the sweep file's")
    sweep.add_argument("--dir", help="the sweep directory (study.db, trial-NNNN/, results); default "
                       "sweeps/<experiment>-<sweep file>; the same directory continues its study")
    sweep.set_defaults(fn=_cmd_sweep)
    ev = sub.add_parser("eval", help="run a trained policy for N episodes and report the return")
    ev.add_argument("run_dir")
    ev.add_argument("--episodes", type=int, default=10)
    ev.add_argument("--seed", type=int, default=12345)
    ev.add_argument("--stochastic", action="store_true", help="sample actions instead of the most likely")
    ev.add_argument("--video", metavar="FILE.mp4", help="also write the episodes as an MP4 (needs srl[video])")
    ev.add_argument("--against", metavar="WHO", help="turn-based games: play matches and report win/draw/loss "
                    "against random, heuristic (the game's scripted player), a scripted policy (connect4-lookahead), "
                    "a snapshot of the run's league (v120) or a checkpoint file; seats alternate. A run with several "
                    "policies: random, each policy against random ones, beside all agents random. Any other run: "
                    "random, a random policy on the same episodes (seeds), both returns and their difference")
    ev.add_argument("--games", type=int, default=200, help="with --against: games to play")
    ev.add_argument("--snapshot", metavar="NAME", help="a run with a self-play league: its learner plays with the "
                    "weights of this snapshot (v120, or best: the highest rated) instead of its newest")
    ev.set_defaults(fn=_cmd_eval)
    graph = sub.add_parser("graph", help="print the workers and streams of an experiment")
    graph.add_argument("experiment", help=EXPERIMENT_HELP)
    graph.add_argument("overrides", nargs="*")
    graph.add_argument("--out", help="draw to FILE (.png, .svg or .pdf) instead of printing")
    graph.set_defaults(fn=_cmd_graph)
    bench = sub.add_parser("bench", help="measure srl: srl bench sampling ENV_ID [key=value ...]")
    bench.add_argument("what", choices=["sampling"])
    bench.add_argument("env_id")
    bench.add_argument("overrides", nargs="*", help="e.g. launch.num_actor_workers=2 stop.time_limit_s=20")
    bench.set_defaults(fn=_cmd_bench)
    board = sub.add_parser("leaderboard", help="print the leaderboard of an ensemble run, or the league table "
                           "(league.json: Elo and record per snapshot) of a self-play run: srl leaderboard RUN_DIR")
    board.add_argument("run_dir")
    board.add_argument("--json", action="store_true", help="print leaderboard.json instead of a table")
    board.set_defaults(fn=_cmd_leaderboard)
    sub.add_parser("config-doc", help="print the config reference (docs/config.md)").set_defaults(fn=_cmd_config_doc)
    ls = sub.add_parser("list", help="list experiments (with env, algorithm), algorithms, policies, envs")
    ls.add_argument("overrides", nargs="*", metavar="modules=...", help="modules=my_rl (or a,b): import your own modules first")
    ls.set_defaults(fn=_cmd_list)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from srl.config import ConfigError

    try:
        return args.fn(args)
    except ConfigError as e:
        print(f"srl: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
