"""Built-in experiments on MiniGrid (pip install minigrid): sparse-reward gridworlds seen through
a 7x7 egocentric view, its image kept alone by MiniGrid's ImgObsWrapper (the Dict's text
`mission` is constant in DoorKey)."""

from __future__ import annotations

from typing import Any

from srl.api.registry import register_experiment


def _doorkey(env: str, total_env_steps: int) -> dict[str, Any]:
    return {
        "env": env,
        "env_wrappers": ["minigrid.wrappers.ImgObsWrapper"],
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 8,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 128,
        "segment_slots": 1,
        "batch_segments": 1,
        "max_policy_lag": 5,
        "total_env_steps": total_env_steps,
        "policy": "actor-critic-mlp",
        "policy_kwargs": {"hidden_sizes": [64, 64]},
        "algorithm": "ppo",
        "algo": {
            "lr": 2.5e-4,
            "gamma": 0.99,
            "gae_lambda": 0.95,
            "clip_coef": 0.2,
            "clip_value": False,
            "entropy_coef": 0.0,
            "epochs": 10,
            "num_minibatches": 16,
        },
    }


@register_experiment("minigrid-doorkey-ppo")
def minigrid_doorkey_ppo() -> dict[str, Any]:
    """MiniGrid-DoorKey-5x5-v0 with PPO."""
    return {**_doorkey("MiniGrid-DoorKey-5x5-v0", 100_000), "target_return": 0.9}


@register_experiment("minigrid-doorkey8-ppo")
def minigrid_doorkey8_ppo() -> dict[str, Any]:
    """MiniGrid-DoorKey-8x8-v0 with PPO."""
    return {**_doorkey("MiniGrid-DoorKey-8x8-v0", 1_000_000), "target_return": 0.9}
