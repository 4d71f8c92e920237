"""Built-in experiments: Continuous control with SAC: Pendulum and MuJoCo's HalfCheetah."""

from __future__ import annotations

from srl.algos.sac import SACConfig
from srl.api.registry import register_experiment
from srl.config import DataflowConfig, ExperimentConfig, ReplayConfig, StopConfig


@register_experiment("pendulum-sac")
def pendulum_sac() -> ExperimentConfig:
    """Pendulum-v1 with SAC: a uniform 1-step replay buffer worker, twin critics, auto temperature."""
    return ExperimentConfig(
        env="Pendulum-v1",
        policy="squashed-gaussian-mlp",
        policy_kwargs={"hidden_sizes": [64, 64]},
        dataflow=DataflowConfig(envs_per_actor=4, sample_length=16),
        replay=ReplayConfig(prioritized=False, n_step=1, replay_ratio=128.0),
        stop=StopConfig(total_env_steps=100_000, target_return=-200.0),
        algorithm="sac",
        algo=SACConfig(actor_lr=1e-3, critic_lr=1e-3, alpha_lr=1e-3, critic_hidden_sizes=[64, 64]),
    )


@register_experiment("halfcheetah-sac")
def halfcheetah_sac() -> ExperimentConfig:
    """MuJoCo HalfCheetah-v5 with SAC and the usual hyperparameters (Haarnoja et al., 2018;
    CleanRL's sac_continuous_action): one env, 256x256 actor and critics, Adam 3e-4 (actor and
    critics; 1e-3 for the temperature), batch 256, tau 0.005, gamma 0.99, uniform 1-step replay of
    1M transitions, 5k transitions stored before the first update, then one update per env step
    (replay ratio 256 = batch size). Needs the [mujoco] extra. Episodes are 1000 steps long;
    published SAC reaches ~10k return in 1M env steps, which takes hours on a CPU.
    """
    return ExperimentConfig(
        env="HalfCheetah-v5",
        policy="squashed-gaussian-mlp",
        policy_kwargs={"hidden_sizes": [256, 256]},
        dataflow=DataflowConfig(envs_per_actor=1, sample_length=8),
        replay=ReplayConfig(capacity=1_000_000, prioritized=False, n_step=1, warmup=5_000, replay_ratio=256.0),
        algorithm="sac",
        algo=SACConfig(alpha_lr=1e-3),
    )
