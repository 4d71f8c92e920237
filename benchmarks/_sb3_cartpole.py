"""Stable-Baselines3 PPO on CartPole-v1 until the last 100 episodes average >= a target return.

Run by `benchmarks/cartpole_vs_sb3.py` with the python of its SB3 virtualenv, not imported:

    python _sb3_cartpole.py --seed 1 --start-time 1712345678.123

Hyperparameters are rl-zoo's for CartPole-v1 PPO (hyperparams/ppo.yml):
8 envs, n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0.0,
learning_rate lin_1e-3, clip_range lin_0.2. rl-zoo trains for n_timesteps 1e5, and its `lin_`
schedules reach 0 at the end of that. Here the two linear schedules reach 0 at `--schedule-steps`
(the caller passes rl-zoo's 1e5) and then stay at 0, while the budget is `--max-steps` (300k):
a seed whose policy is good by then, but whose last-100 window still holds older, worse
episodes, can still fill the window and get there. Without `--schedule-steps` the schedules span
the whole budget, as rl-zoo's would with `--n-timesteps 300000` (much slower to 475: seed 1
took 186k steps that way, against 62k with the 1e5 horizon).

Prints one JSON line at the end: {"reached": bool, "time_s": seconds from --start-time (the
parent's clock just before it launched this process, so interpreter start and imports count),
"env_steps": steps at that point, ...}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--start-time", type=float, default=None, help="time.time() when the parent launched us")
    ap.add_argument("--target", type=float, default=475.0)
    ap.add_argument("--window", type=int, default=100)
    ap.add_argument("--max-steps", type=int, default=300_000)
    ap.add_argument("--schedule-steps", type=int, default=None, help="steps over which lr/clip go to 0")
    ap.add_argument("--n-envs", type=int, default=8)
    ap.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    ap.add_argument("--progress-every", type=int, default=10_000, help="print progress to stderr every N steps")
    args = ap.parse_args()
    start = args.start_time if args.start_time is not None else time.time()


    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    imported_s = time.time() - start
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    max_steps = args.max_steps
    schedule_steps = args.schedule_steps or max_steps

    def linear(initial: float):
        # SB3 passes progress_remaining = 1 - steps / total_timesteps; rescale it to the schedule horizon.
        def schedule(progress_remaining: float) -> float:
            steps = (1.0 - progress_remaining) * max_steps
            return initial * max(0.0, 1.0 - steps / schedule_steps)

        return schedule

    env = make_vec_env("CartPole-v1", n_envs=args.n_envs, seed=args.seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        device="cpu",
        seed=args.seed,
        verbose=0,
    )
    cb = stop_at_target(BaseCallback, args.window, args.target, args.progress_every, start)
    model.learn(total_timesteps=max_steps, callback=cb)
    out = {
        **run_result(cb, model, imported_s, start),
        "seed": args.seed,
        "max_steps": max_steps,
        "schedule_steps": schedule_steps,
        "sb3_version": stable_baselines3.__version__,
        "torch_version": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }
    print(json.dumps(out), flush=True)


def stop_at_target(base: type, window: int, target: float, progress_every: int, start: float):
    """An SB3 callback (a subclass of `base`, SB3's BaseCallback, which the caller imports after its
    clock started) keeping the last `window` episode returns: a progress line to stderr every
    `progress_every` env steps, and training stops once their mean reaches `target`, noting
    `reached_at` = (seconds since `start`, env steps). benchmarks/_sb3_tuned.py uses it too."""
    from collections import deque

    class StopAtTarget(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque[float] = deque(maxlen=window)
            self.episodes = 0
            self.reached_at: tuple[float, int] | None = None
            self.next_progress = progress_every

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if (ep := info.get("episode")) is not None:
                    self.returns.append(float(ep["r"]))
                    self.episodes += 1
            if self.num_timesteps >= self.next_progress:
                self.next_progress += progress_every
                mean = sum(self.returns) / len(self.returns) if self.returns else float("nan")
                print(f"steps={self.num_timesteps} episodes={self.episodes} return_mean={mean:.2f} "
                      f"t={time.time() - start:.1f}s", file=sys.stderr, flush=True)
            if len(self.returns) == window and sum(self.returns) / window >= target:
                self.reached_at = (time.time() - start, int(self.num_timesteps))
                return False
            return True

    return StopAtTarget()


def run_result(cb, model, imported_s: float, start: float) -> dict:
    """What a `stop_at_target` run reached: the JSON line's fields both SB3 scripts print."""
    return {
        "reached": cb.reached_at is not None,
        "time_s": round(cb.reached_at[0], 3) if cb.reached_at else None,
        "env_steps": cb.reached_at[1] if cb.reached_at else None,
        "total_env_steps": int(model.num_timesteps),
        "episodes": cb.episodes,
        "final_return_mean": sum(cb.returns) / len(cb.returns) if cb.returns else None,
        "import_s": round(imported_s, 3),
        "end_s": round(time.time() - start, 3),
    }


if __name__ == "__main__":
    main()
