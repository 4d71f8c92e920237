"""Built-in experiments with recurrent policies, on partially observable tasks."""

from __future__ import annotations

from typing import Any

from srl.api.registry import register_experiment


@register_experiment("cartpole-lstm-ppo")
def cartpole_lstm_ppo() -> dict[str, Any]:
    """CartPole without velocities (CartPoleNoVel-v1) with an LSTM actor-critic and PPO.

    The observation holds positions only, so the policy must remember the last steps to know
    where the pole is heading; the same PPO with the MLP of cartpole-ppo stalls far below the LSTM
    (experiment cartpole-novel-mlp-ppo, to compare). The trainer re-runs the
    LSTM over the 32 steps of each of the 16 segment rows from the stored state, the first 4 only
    warming it up; 4 full-batch epochs, since each pass through time costs 32 sequential steps.
    """
    return {
        "env": "CartPoleNoVel-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 16,
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
            "epochs": 4,
            "num_minibatches": 1,
            "clip_value": False,
            "burn_in": 4,
        },
    }


@register_experiment("cartpole-novel-mlp-ppo")
def cartpole_novel_mlp_ppo() -> dict[str, Any]:
    """The memoryless baseline of cartpole-lstm-ppo: the same env and PPO with a 64x64 MLP policy."""
    values = cartpole_lstm_ppo()
    values.update(policy="actor-critic-mlp", policy_kwargs={}, algo={**values["algo"], "burn_in": 0})
    return values


@register_experiment("cartpole-r2d2")
def cartpole_r2d2() -> dict[str, Any]:
    """CartPole without velocities with recurrent DQN (R2D2): an LSTM Q-network, sequences of 16
    steps replayed by priority from their stored start state, 4 burn-in steps each."""
    return {
        "env": "CartPoleNoVel-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 8,
        "sample_length": 16,
        "segment_slots": 2,
        "total_env_steps": 300_000,
        "target_return": 475.0,
        "policy": "recurrent-q",
        "policy_kwargs": {"cell": "lstm", "hidden": 64},
        "epsilon": 0.3,
        "epsilon_alpha": 7.0,
        # capacity, batch_size and warmup count sequences of 16 steps; 16 sequences sampled per one stored
        "replay": {"capacity": 5_000, "batch_size": 32, "warmup": 64, "replay_ratio": 16.0},
        "algorithm": "r2d2",
        "algo": {"lr": 1e-3, "gamma": 0.99, "n_step": 3, "burn_in": 4, "target_update_interval": 100},
    }
