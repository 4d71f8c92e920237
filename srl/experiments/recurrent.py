"""Built-in experiments with recurrent policies, on partially observable tasks."""

from __future__ import annotations

from typing import Any

from srl.api.registry import register_experiment


@register_experiment("cartpole-lstm-ppo")
def cartpole_lstm_ppo() -> dict[str, Any]:
    """CartPole without velocities (CartPoleNoVel-v1) with an LSTM actor-critic and PPO.

    The observation holds positions only, so the policy must remember the last steps to know
    where the pole is heading; the MLP of cartpole-ppo stalls far below the LSTM here
    (`policy=actor-critic-mlp policy_kwargs={} algo.burn_in=0` to compare). Each of the 16 segment rows of a batch
    is one minibatch row; the trainer re-runs the LSTM over its 32 steps from the stored state,
    the first 4 only warming it up.
    """
    return {
        "env": "CartPoleNoVel-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 16,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 32,
        "segment_slots": 1,
        "batch_segments": 1,
        "max_policy_lag": 5,
        "total_env_steps": 500_000,
        "target_return": 475.0,
        "policy": "recurrent-actor-critic",
        "policy_kwargs": {"cell": "lstm", "hidden": 64},
        "algorithm": "ppo",
        "algo": {
            "lr": 1e-3,
            "anneal_lr": False,
            "gamma": 0.98,
            "gae_lambda": 0.9,
            "epochs": 8,
            "num_minibatches": 4,
            "clip_value": False,
            "burn_in": 4,
        },
    }
