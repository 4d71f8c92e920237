"""Built-in experiments on MiniGrid (pip install minigrid): sparse-reward gridworlds seen through
a 7x7 egocentric view, its image kept alone by MiniGrid's ImgObsWrapper (the Dict's text
`mission` is constant in DoorKey). DoorKey-8x8 (minigrid-doorkey8-ppo) is in srl.experiments.tuned."""

from __future__ import annotations

from srl.algos.ppo import PPOConfig
from srl.api.registry import register_experiment
from srl.config import DataflowConfig, ExperimentConfig, StopConfig


def _doorkey(env: str, total_env_steps: int, target_return: float) -> ExperimentConfig:
    """PPO in the spirit of rl-baselines3-zoo's MiniGrid settings (8 envs x 128 steps per update,
    gamma 0.99, lambda 0.95, clip 0.2, no entropy bonus), with fewer, larger gradient steps: 4
    epochs of 4 minibatches at lr 1e-3 (annealed to 0) reached a mean-100 return of 0.9 on
    DoorKey-5x5 in 30k-39k env steps and 10-15 s (seeds 1-3), where the zoo's 10 epochs of 16
    minibatches at 2.5e-4 took ~110k steps and ~45 s (seed 1). The MLP reads the image's small
    integer ids (object, colour, state: 0-10) as floats; the multi-input policy's CNN (which scales
    uint8 by 1/255) needed fewer env steps (47k) but ~4x the wall time per step.
    """
    return ExperimentConfig(
        env=env,
        env_wrappers=["minigrid.wrappers.ImgObsWrapper"],
        policy="actor-critic-mlp",  # measured so (docstring); auto would give a CNN
        policy_kwargs={"hidden_sizes": [64, 64]},
        dataflow=DataflowConfig(envs_per_actor=8, sample_length=128, segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=total_env_steps, target_return=target_return),
        algorithm="ppo",
        algo=PPOConfig(gamma=0.99, gae_lambda=0.95, epochs=4, num_minibatches=4),
    )


@register_experiment("minigrid-doorkey-ppo")
def minigrid_doorkey_ppo() -> ExperimentConfig:
    """MiniGrid-DoorKey-5x5-v0 with PPO to a mean-100 return of 0.9 (rl-zoo's PPO: 0.97)."""
    return _doorkey("MiniGrid-DoorKey-5x5-v0", 200_000, target_return=0.9)

