"""Built-in experiments: goal-conditioned tasks with hindsight experience replay (srl.data.her)."""

from __future__ import annotations

from srl.algos.dqn import DQNConfig
from srl.algos.sac import SACConfig
from srl.api.registry import register_experiment
from srl.config import DataflowConfig, ExperimentConfig, HerConfig, ReplayConfig, StopConfig


@register_experiment("bitflip-dqn-her")
def bitflip_dqn_her() -> ExperimentConfig:
    """8-bit BitFlipping-v0 (srl.envs.goals) with DQN + HER (future, k=4): 8 envs, uniform 1-step
    replay, gamma 0.98. A random policy almost never reaches a random 8-bit goal in 8 flips
    (return -8), so plain DQN has nothing to learn from; with HER the greedy return climbs toward
    the best, -4 on average (the flips needed)."""
    return ExperimentConfig(
        env="BitFlipping-v0",
        env_kwargs={"n_bits": 8},
        policy="q-mlp",
        policy_kwargs={"hidden_sizes": [128, 128]},
        dataflow=DataflowConfig(envs_per_actor=8, sample_length=16),
        replay=ReplayConfig(capacity=50_000, batch_size=128, prioritized=False, n_step=1, gamma=0.98, warmup=500,
                            replay_ratio=16.0, her=HerConfig(strategy="future", k=4)),
        stop=StopConfig(total_env_steps=30_000),
        algorithm="dqn",
        algo=DQNConfig(lr=1e-3, target_update_interval=100, epsilon=0.2, epsilon_alpha=0.0,
                       epsilon_anneal_env_steps=5_000),
    )


@register_experiment("fetchreach-sac-her")
def fetchreach_sac_her() -> ExperimentConfig:
    """gymnasium-robotics FetchReach-v4 with SAC + HER, in the spirit of rl-baselines3-zoo's
    FetchReach entry (SAC, HerReplayBuffer future k=4, gamma 0.95, lr 1e-3, batch 256, 64x64
    networks, 1,000 steps before learning, one update per env step, 20k env steps, observations
    standardized by running statistics as the zoo's VecNormalize does: normalize_obs) without the
    zoo's TimeFeatureWrapper. One env (episodes are 50 steps, each
    ended by the time limit); eval: 20 greedy episodes, return -(steps away from the goal).
    Needs gymnasium-robotics (the [test] extra) with mujoco < 3.12 (1.4.2 fails on the joint-type enums of 3.12 and newer)."""
    return ExperimentConfig(
        env="gymnasium_robotics:FetchReach-v4",
        policy="squashed-gaussian-mlp",
        policy_kwargs={"hidden_sizes": [64, 64], "normalize_obs": True},
        dataflow=DataflowConfig(envs_per_actor=1, sample_length=8),
        replay=ReplayConfig(capacity=1_000_000, batch_size=256, prioritized=False, n_step=1, gamma=0.95, warmup=1_000,
                            replay_ratio=256.0, her=HerConfig(strategy="future", k=4)),
        stop=StopConfig(total_env_steps=20_000),
        algorithm="sac",
        algo=SACConfig(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, critic_hidden_sizes=[64, 64]),
    )
