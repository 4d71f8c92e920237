"""Built-in experiments: each a function returning its config values (overrides go on top)."""

from __future__ import annotations

from typing import Any

from srl.api.registry import register_experiment


@register_experiment("cartpole-ppo")
def cartpole_ppo() -> dict[str, Any]:
    """CartPole-v1 with PPO on the local default; tuned for wall time to a return of 475."""
    return {
        "env": "CartPole-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 16,
        "ring_splits": 2,
        "num_policy_workers": 1,
        "sample_length": 32,
        "batch_segments": 2,
        "max_policy_lag": 2,
        "total_env_steps": 500_000,
        "target_return": 475.0,
        "algorithm": "ppo",
        "algo": {"lr": 1e-3, "gamma": 0.98, "gae_lambda": 0.8, "epochs": 10, "num_minibatches": 1},
    }
