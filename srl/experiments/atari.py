"""Built-in experiments: Atari with the standard preprocessing (srl.envs.atari)."""

from __future__ import annotations

from srl.algos.ppo import PPOConfig
from srl.api.registry import register_experiment
from srl.config import DataflowConfig, ExperimentConfig, LaunchConfig, StopConfig


@register_experiment("pong-ppo")
def pong_ppo() -> ExperimentConfig:
    """ALE/Pong-v5 with PPO and the Nature CNN, with the Atari PPO hyperparameters of the PPO paper
    (and CleanRL's ppo_atari): 8 envs x 128 steps per update, 4 epochs of 4 minibatches, lr 2.5e-4
    annealed to 0 over 10M env steps, clip 0.1, entropy 0.01, gamma 0.99, lambda 0.95, 4 stacked
    84x84 grey frames (srl.envs.atari). Sticky actions are off, as in the PPO paper's and CleanRL's
    NoFrameskip-v4 runs that these settings come from; `env_kwargs.repeat_action_probability=0.25`
    restores the v5 default (Machado et al.'s harder protocol). With `env_backend=envpool` EnvPool
    steps the 8 envs. The CNN trunk computes in bfloat16 where the hardware has bfloat16 units
    (trunk_precision=auto).
    """
    return ExperimentConfig(
        env="ALE/Pong-v5",
        env_kwargs={"frame_stack": 4, "repeat_action_probability": 0.0},
        policy="actor-critic-cnn",
        policy_kwargs={"trunk_precision": "auto"},
        launch=LaunchConfig(
            heartbeat_timeout_s=120.0,
            trainer_torch_threads=2,  # the CNN update is most of the run's work; the actor needs little
        ),
        dataflow=DataflowConfig(envs_per_actor=8, sample_length=128, segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=10_000_000, target_return=20.0),
        algorithm="ppo",
        algo=PPOConfig(lr=2.5e-4, anneal_env_steps=10_000_000, gamma=0.99, gae_lambda=0.95, clip_coef=0.1,
                       clip_value=True, value_clip_coef=0.1, entropy_coef=0.01, epochs=4, num_minibatches=4),
    )
