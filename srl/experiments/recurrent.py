"""Built-in experiments with recurrent policies, on partially observable tasks."""

from __future__ import annotations

from srl.algos.ppo import PPOConfig
from srl.algos.r2d2 import R2D2Config
from srl.api.registry import register_experiment
from srl.config import DataflowConfig, ExperimentConfig, ReplayConfig, StopConfig


@register_experiment("cartpole-lstm-ppo")
def cartpole_lstm_ppo() -> ExperimentConfig:
    """CartPole without velocities (CartPoleNoVel-v1) with an LSTM actor-critic and PPO.

    The observation holds positions only, so the policy must remember the last steps to know
    where the pole is heading; the same PPO with the MLP of cartpole-ppo stalls far below the LSTM
    (experiment cartpole-novel-mlp-ppo, to compare). The trainer re-runs the
    LSTM over the 32 steps of each of the 16 segment rows from the stored state, the first 4 only
    warming it up; 4 full-batch epochs, since each pass through time costs 32 sequential steps.
    """
    return ExperimentConfig(
        env="CartPoleNoVel-v1",
        policy="recurrent-actor-critic",
        policy_kwargs={"cell": "lstm", "hidden": 64},
        dataflow=DataflowConfig(segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=500_000, target_return=475.0),
        algorithm="ppo",
        algo=PPOConfig(anneal_lr=False, gae_lambda=0.9, epochs=4, burn_in=4),
    )


@register_experiment("cartpole-novel-mlp-ppo")
def cartpole_novel_mlp_ppo() -> ExperimentConfig:
    """The memoryless baseline of cartpole-lstm-ppo: the same env and PPO with a 64x64 MLP policy."""
    config = cartpole_lstm_ppo()
    config.policy, config.policy_kwargs = "actor-critic-mlp", {}
    assert isinstance(config.algo, PPOConfig)
    config.algo.burn_in = 0
    return config


@register_experiment("cartpole-r2d2")
def cartpole_r2d2() -> ExperimentConfig:
    """CartPole without velocities with recurrent DQN (R2D2): an LSTM Q-network, sequences of 16
    steps replayed by priority from their stored start state, 4 burn-in steps each."""
    return ExperimentConfig(
        env="CartPoleNoVel-v1",
        policy="recurrent-q",
        policy_kwargs={"cell": "lstm", "hidden": 64},
        dataflow=DataflowConfig(envs_per_actor=8, sample_length=16),
        replay=ReplayConfig(capacity=5_000, batch_size=32, warmup=64, replay_ratio=16.0),
        stop=StopConfig(total_env_steps=300_000, target_return=475.0),
        algorithm="r2d2",
        algo=R2D2Config(epsilon=0.3),
    )
