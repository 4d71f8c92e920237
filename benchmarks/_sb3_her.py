"""Stable-Baselines3 SAC + HER with rl-baselines3-zoo's FetchReach settings, until the greedy
evaluation's mean return reaches a target or the env-step budget is spent.

Run by `benchmarks/her_vs_sb3.py` (a child process, so interpreter start and imports count):

    python _sb3_her.py --env FetchReach-v4 --seed 1 --budget 20000 --target -5 --start-time T

The zoo's entry (hyperparams/sac.yml, FetchReach): MultiInputPolicy, HerReplayBuffer (future,
n_sampled_goal 4), buffer 1M, batch 256, gamma 0.95, lr 1e-3, ent_coef auto, learning_starts
1000, net_arch [64, 64], normalize: true (VecNormalize), TimeFeatureWrapper. The last is left
out (sb3-contrib is not installed here, and srl's side has no time feature either).

Evaluation as srl's evaluator does it: `--eval-episodes` deterministic episodes every
`--eval-every` env steps (SB3's EvalCallback, which also logs is_success); the run stops at the
first round whose mean return reaches the target. Prints one JSON line at the end.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="FetchReach-v4")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--budget", type=int, default=20_000)
    p.add_argument("--target", type=float, default=-5.0)
    p.add_argument("--eval-every", type=int, default=1_000)
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--no-normalize", action="store_true")
    p.add_argument("--start-time", type=float, default=None)
    p.add_argument("--torch-threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    a = p.parse_args()
    start = a.start_time or time.time()

    import gymnasium as gym
    import gymnasium_robotics
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    gym.register_envs(gymnasium_robotics)
    if a.torch_threads:
        torch.set_num_threads(a.torch_threads)

    def make_env(normalize: bool, training: bool):
        venv = DummyVecEnv([lambda: gym.make(a.env)])
        return VecNormalize(venv, gamma=0.95, training=training, norm_reward=training) if normalize else venv

    env = make_env(not a.no_normalize, True)
    eval_env = make_env(not a.no_normalize, False)
    if not a.no_normalize:  # the evaluation reads the training statistics (SB3's EvalCallback syncs them)
        eval_env.obs_rms = env.obs_rms
    model = SAC("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(goal_selection_strategy="future", n_sampled_goal=4),
                buffer_size=1_000_000, batch_size=256, gamma=0.95, learning_rate=1e-3, ent_coef="auto",
                learning_starts=1_000, policy_kwargs=dict(net_arch=[64, 64]), seed=a.seed, verbose=0)
    stop = StopTrainingOnRewardThreshold(reward_threshold=a.target, verbose=0)
    evals = EvalCallback(eval_env, callback_on_new_best=stop, n_eval_episodes=a.eval_episodes,
                         eval_freq=a.eval_every, deterministic=True, verbose=1)  # progress in the log
    model.learn(total_timesteps=a.budget, callback=evals)
    reached = evals.best_mean_reward >= a.target
    success = evals.evaluations_successes[-1] if evals.evaluations_successes else []
    print(json.dumps({
        "reached": bool(reached), "time_s": round(time.time() - start, 2), "env_steps": int(model.num_timesteps),
        "eval_return_mean": float(evals.last_mean_reward), "torch_threads": torch.get_num_threads(),
        "eval_success_rate": float(sum(success) / len(success)) if len(success) else None,
    }), flush=True)


if __name__ == "__main__":
    main()
