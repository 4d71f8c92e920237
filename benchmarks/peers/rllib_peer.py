"""RLlib (ray[rllib] 2.60, new API stack): env-runner sampling and PPO training throughput.

Two env runners (one per core), each with a vector of envs. Sampling asks every runner for
`random_actions=True` samples; training runs `algo.train()` until the env-step budget. Init and
build (Ray start ~5 s, PPO build ~7 s) are timed apart and left out of the rate. Run as a script
it is the child: `rllib_peer.py sample|train ENV AMOUNT` (seconds for sample, env steps for train).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

VENV = "rllib"
PACKAGES = ["ray[rllib]==2.60.0", "gymnasium==1.2.2", "ale-py", "opencv-python-headless"]
PROBE = ["ray", "gymnasium", "numpy", "torch"]
NUM_RUNNERS = 2
# Same per-update work as srl's cartpole-ppo (512 steps, 10 epochs, one minibatch, 64x64 MLP);
# Pong: the usual Atari PPO update (1024 steps, 4 epochs of 4 minibatches, Nature CNN).
SETTINGS = {
    "cartpole": {"envs_per_runner": 8, "batch": 512, "minibatch": 512, "epochs": 10,
                 "model": {"fcnet_hiddens": [64, 64]}},
    "pong": {"envs_per_runner": 4, "batch": 1024, "minibatch": 256, "epochs": 4,
             "model": {"conv_filters": [[32, 8, 4], [64, 4, 2], [64, 3, 1]], "conv_activation": "relu",
                       "head_fcnet_hiddens": [512]}},
}


def run(mode: str, env: str, amount: float, timeout_s: float = 600) -> dict[str, Any]:
    from common import PeerError, ensure_venv, run_peer_script

    try:
        versions = ensure_venv(VENV, PACKAGES, PROBE)
    except PeerError as e:
        return {"error": str(e)}
    return {**run_peer_script(VENV, "rllib_peer.py", [mode, env, str(amount)], timeout_s), "versions": versions}


def _build(env: str, train: bool = False) -> Any:
    """The PPO algorithm; for training, Pong's observations are 4 stacked frames scaled to [0, 1]
    (RLlib's CNN does not scale uint8 frames itself: they fail in its first convolution)."""
    import ray
    from _child import make_env
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    # Ray's socket paths must stay short: its temp dir goes under the child's private TMPDIR.
    ray.init(num_cpus=NUM_RUNNERS + 1, include_dashboard=False, log_to_driver=False,
             _temp_dir=os.path.join(os.environ.get("PEER_TMP", "/tmp"), "ray"))
    register_env("peer-env", lambda _config: make_env(env, channel_last=True, frame_stack=4 if train else 1,
                                                      scaled_float=train))
    s = SETTINGS[env]
    config = (
        PPOConfig()
        .environment("peer-env")
        .env_runners(num_env_runners=NUM_RUNNERS, num_envs_per_env_runner=s["envs_per_runner"],
                     num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=s["batch"], minibatch_size=s["minibatch"], num_epochs=s["epochs"],
                  lr=3e-4 if env == "pong" else 1e-3)
        .rl_module(model_config=DefaultModelConfig(**s["model"]))
        .debugging(seed=0)
    )
    return config.build_algo()


def _lifetime_steps(result: dict[str, Any]) -> int:
    for where in (result, result.get("env_runners", {})):
        value = where.get("num_env_steps_sampled_lifetime")
        if isinstance(value, (int, float)):
            return int(value)
    raise KeyError("no num_env_steps_sampled_lifetime in RLlib's result")


def child_sample(env: str, seconds: float) -> None:
    from _child import emit, timed_steps

    started = time.perf_counter()
    algo = _build(env)
    init_s = time.perf_counter() - started
    per_call = 1000 if env == "cartpole" else 100

    def count(runner: Any) -> int:
        return sum(len(e) for e in runner.sample(num_timesteps=per_call, random_actions=True))

    def step() -> int:
        return sum(algo.env_runner_group.foreach_env_runner(count, local_env_runner=False))

    result = timed_steps(step, seconds, warmup_s=2.0)
    emit({"peer": "rllib env runners", "num_env_runners": NUM_RUNNERS, "init_s": round(init_s, 2), **result})
    algo.stop()


def child_train(env: str, budget: int) -> None:
    from _child import emit

    started = time.perf_counter()
    algo = _build(env, train=True)
    init_s = time.perf_counter() - started
    train_start = time.perf_counter()
    steps = iterations = 0
    while steps < budget:
        steps = _lifetime_steps(algo.train())
        iterations += 1
    train_s = time.perf_counter() - train_start
    emit({"peer": "rllib PPO", "env_steps": steps, "iterations": iterations, "init_s": round(init_s, 2),
          "train_s": round(train_s, 3), "env_steps_per_s": round(steps / train_s, 1), "settings": SETTINGS[env]})
    algo.stop()


if __name__ == "__main__":
    mode, env_name, amount = sys.argv[1], sys.argv[2], float(sys.argv[3])
    child_sample(env_name, amount) if mode == "sample" else child_train(env_name, int(amount))
