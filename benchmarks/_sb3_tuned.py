"""Stable-Baselines3 with rl-baselines3-zoo's hyperparameters on one env, until the mean return of
the last 100 training episodes reaches a target or the env-step budget is spent.

Run by `benchmarks/tuned_vs_sb3.py` with the python of its SB3 virtualenv, not imported:

    python _sb3_tuned.py --env LunarLander-v3 --seed 1 --budget 1000000 --target 242.119

The settings are the zoo's (hyperparams/ppo.yml and sac.yml at DLR-RM/rl-baselines3-zoo 22e3ff2),
written out below per env: `normalize: true` is VecNormalize (observations and rewards, gamma as
the algorithm's), `lin_X` a rate falling linearly from X to 0 over the run's budget (the zoo's
n_timesteps when the budget is the zoo's). Episode returns are the Monitor's (make_vec_env wraps
each env in one inside VecNormalize), so they are raw env returns.

Prints one JSON line at the end: {"reached", "time_s" (from --start-time, the parent's clock
just before it launched this process: interpreter start and imports count), "env_steps" at the
target, "final_return_mean", "total_env_steps", ...}.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any


def zoo_settings(env_id: str) -> tuple[str, int, bool, dict[str, Any], list[str]]:
    """(algorithm, n_envs, normalize, model kwargs, env wrapper import paths) for `env_id`.
    A kwarg "lin:X" is a linear schedule from X; "nn:Name" a torch.nn class."""
    table: dict[str, tuple[str, int, bool, dict[str, Any], list[str]]] = {
        "LunarLander-v3": ("ppo", 16, False, dict(
            n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01), []),
        "MountainCarContinuous-v0": ("sac", 1, False, dict(
            learning_rate=3e-4, buffer_size=50_000, batch_size=512, ent_coef=0.1, train_freq=32, gradient_steps=32,
            gamma=0.9999, tau=0.01, learning_starts=0, use_sde=True,
            policy_kwargs=dict(log_std_init=-3.67, net_arch=[64, 64])), []),
        "LunarLanderContinuous-v3": ("sac", 1, False, dict(
            batch_size=256, learning_rate="lin:7.3e-4", buffer_size=1_000_000, ent_coef="auto", gamma=0.99, tau=0.01,
            train_freq=1, gradient_steps=1, learning_starts=10_000, policy_kwargs=dict(net_arch=[400, 300])), []),
        "BipedalWalker-v3": ("ppo", 32, True, dict(
            n_steps=2048, batch_size=64, gae_lambda=0.95, gamma=0.999, n_epochs=10, ent_coef=0.0, learning_rate=3e-4,
            clip_range=0.18), []),
        "Hopper-v5": ("ppo", 1, True, dict(  # the zoo's Hopper-v3 entry
            batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05, ent_coef=0.00229519, clip_range=0.2,
            n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671,
            policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="nn:ReLU",
                               net_arch=dict(pi=[256, 256], vf=[256, 256]))), []),
        # the zoo's MiniGrid defaults (its DoorKey-5x5 entry; it has none for 8x8)
        "MiniGrid-DoorKey-8x8-v0": ("ppo", 8, True, dict(
            n_steps=128, batch_size=64, gae_lambda=0.95, gamma=0.99, n_epochs=10, ent_coef=0.0, learning_rate=2.5e-4,
            clip_range=0.2), ["minigrid.wrappers.FlatObsWrapper"]),
    }
    if env_id not in table:
        raise SystemExit(f"no zoo settings written here for {env_id!r}; known: {', '.join(table)}")
    return table[env_id]


def _resolve(value: Any) -> Any:
    """"lin:X" -> a linear schedule from X; "nn:Name" -> torch.nn.Name; dicts and lists recursively."""
    if isinstance(value, dict):
        return {k: _resolve(v) for k, v in value.items()}
    if isinstance(value, str) and value.startswith("lin:"):
        initial = float(value[4:])
        return lambda progress_remaining: progress_remaining * initial
    if isinstance(value, str) and value.startswith("nn:"):
        import torch.nn

        return getattr(torch.nn, value[3:])
    return value


def _wrapper_class(paths: list[str]) -> Any:
    import importlib

    if not paths:
        return None
    classes = [getattr(importlib.import_module(p.rpartition(".")[0]), p.rpartition(".")[2]) for p in paths]

    def wrap(env: Any) -> Any:
        for cls in classes:
            env = cls(env)
        return env

    return wrap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--budget", type=int, required=True, help="env steps")
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--start-time", type=float, default=None, help="time.time() when the parent launched us")
    ap.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--progress-every", type=int, default=20_000, help="progress line to stderr every N steps")
    args = ap.parse_args()
    start = args.start_time if args.start_time is not None else time.time()

    import stable_baselines3
    import torch
    from _sb3_cartpole import run_result, stop_at_target  # beside this file: CartPole's stopping rule and result
    from stable_baselines3 import PPO, SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    if args.env.startswith("MiniGrid"):
        import minigrid  # noqa: F401  (registers the MiniGrid ids)
    imported_s = time.time() - start
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    algo, n_envs, normalize, kwargs, wrappers = zoo_settings(args.env)

    env = make_vec_env(args.env, n_envs=n_envs, seed=args.seed, wrapper_class=_wrapper_class(wrappers))
    if normalize:
        env = VecNormalize(env, gamma=kwargs["gamma"])
    cls = PPO if algo == "ppo" else SAC
    model = cls("MlpPolicy", env, device="cpu", seed=args.seed, verbose=0, **_resolve(kwargs))
    cb = stop_at_target(BaseCallback, args.window, args.target, args.progress_every, start)
    model.learn(total_timesteps=args.budget, callback=cb)
    out = {
        **run_result(cb, model, imported_s, start),
        "seed": args.seed,
        "algorithm": algo,
        "n_envs": n_envs,
        "sb3_version": stable_baselines3.__version__,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
