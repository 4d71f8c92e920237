"""Built-in experiments: Atari with the standard preprocessing (srl.envs.atari)."""

from __future__ import annotations

from typing import Any

from srl.api.registry import register_experiment


@register_experiment("pong-ppo")
def pong_ppo() -> dict[str, Any]:
    """ALE/Pong-v5 with PPO and the Nature CNN, with the Atari PPO hyperparameters of the PPO paper
    (and CleanRL's ppo_atari): 8 envs x 128 steps per update, 4 epochs of 4 minibatches, lr 2.5e-4
    annealed to 0 over 10M env steps, clip 0.1, entropy 0.01, gamma 0.99, lambda 0.95, 4 stacked
    84x84 grey frames (srl.envs.atari). Sticky actions are off, as in the PPO paper's and CleanRL's
    NoFrameskip-v4 runs that these settings come from; `env_kwargs.repeat_action_probability=0.25`
    restores the v5 default (Machado et al.'s harder protocol). With `env_backend=envpool` EnvPool
    steps the 8 envs. The CNN trunk computes in bfloat16 where the hardware has bfloat16 units
    (trunk_precision=auto).
    """
    return {
        "env": "ALE/Pong-v5",
        # sticky actions off: with v5's 0.25 seed 1 reached 12.1 in 10M env steps, without them 18
        # in 2.4M (docs/results.md)
        "env_kwargs": {"frame_stack": 4, "repeat_action_probability": 0.0},
        "policy": "actor-critic-cnn",
        # bfloat16 convolutions where the CPU or GPU has bfloat16 units (float32 weights and
        # heads): a minibatch update about 1.6x faster on an AVX512-BF16 CPU (docs/benchmarks.md)
        "policy_kwargs": {"trunk_precision": "auto"},
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 8,
        "sample_length": 128,
        "segment_slots": 1,
        "batch_segments": 1,
        "max_policy_lag": 5,
        "heartbeat_timeout_s": 120.0,
        "trainer_torch_threads": 2,  # the CNN update is most of the run's work; the actor needs little
        "total_env_steps": 10_000_000,
        "target_return": 20.0,
        "algorithm": "ppo",
        "algo": {
            "lr": 2.5e-4,
            "anneal_env_steps": 10_000_000,
            "final_lr_fraction": 0.0,
            "gamma": 0.99,
            "gae_lambda": 0.95,
            "clip_coef": 0.1,
            "clip_value": True,
            "value_clip_coef": 0.1,
            "entropy_coef": 0.01,
            "value_coef": 0.5,
            "epochs": 4,
            "num_minibatches": 4,
            "max_grad_norm": 0.5,
        },
    }
