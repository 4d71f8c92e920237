"""Built-in experiments: Classic control with the sampling dataflow: CartPole (PPO, APPO, DQN) and Acrobot."""

from __future__ import annotations

from srl.algos.appo import APPOConfig
from srl.algos.dqn import DQNConfig
from srl.algos.ppo import PPOConfig
from srl.api.registry import register_experiment
from srl.config import DataflowConfig, ExperimentConfig, ReplayConfig, StopConfig


@register_experiment("cartpole-ppo")
def cartpole_ppo() -> ExperimentConfig:
    """CartPole-v1 with PPO on the local launcher, tuned for wall time to a mean return of 475.

    Inference runs inline in the actor: a 64x64 MLP acts on 16 rows in ~80 us, less than a round
    trip to a policy worker, and on 2 cores the trainer needs the other core. With a GPU or a large
    network, `dataflow.inference=policy_worker` batches requests across actors instead. The trainer is the
    bottleneck here, so one segment slot per group is enough to keep it fed and holds the policy
    lag to one version (two slots: two versions and ~30% more env steps to the target).
    """
    return ExperimentConfig(
        dataflow=DataflowConfig(
            segment_slots=1,  # the actor fills the next segment while the trainer updates: lag <= 1
            max_policy_lag=5,
        ),
        stop=StopConfig(total_env_steps=500_000, target_return=475.0),
        algorithm="ppo",
        algo=PPOConfig(anneal_env_steps=150_000, final_lr_fraction=0.1),
    )


@register_experiment("cartpole-appo")
def cartpole_appo() -> ExperimentConfig:
    """CartPole-v1 with asynchronous PPO (V-trace targets) on the local launcher.

    Unlike cartpole-ppo, actors run ahead of the trainer: two ring groups with two segment slots
    each, so samples arrive up to a few versions old and V-trace plus the clipped ratio correct for
    that lag instead of the trainer dropping the segments.
    """
    return ExperimentConfig(
        dataflow=DataflowConfig(ring_splits=2, batch_segments=2, max_policy_lag=8),
        stop=StopConfig(total_env_steps=500_000, target_return=475.0),
        algorithm="appo",
        algo=APPOConfig(anneal_env_steps=150_000, final_lr_fraction=0.1, gamma=0.98, vtrace_lambda=0.9,
                        epochs=10),
    )


@register_experiment("acrobot-ppo")
def acrobot_ppo() -> ExperimentConfig:
    """Acrobot-v1 with PPO to a mean-100 return of -100 (-1 per step until the tip swings up).

    Rewards are sparse-ish (every step costs the same), so a longer horizon than CartPole's
    (gamma 0.99, lambda 0.95) and a little entropy keep exploring until the first swing-ups.
    """
    return ExperimentConfig(
        env="Acrobot-v1",
        dataflow=DataflowConfig(segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=500_000, target_return=-100.0),
        algorithm="ppo",
        algo=PPOConfig(anneal_env_steps=300_000, final_lr_fraction=0.1, gamma=0.99, gae_lambda=0.95, epochs=4,
                       num_minibatches=4, entropy_coef=0.01),
    )


@register_experiment("cartpole-dqn")
def cartpole_dqn() -> ExperimentConfig:
    """CartPole-v1 with DQN / Ape-X: actors with per-env epsilons, a prioritized n-step replay
    buffer worker, a double-DQN trainer.

    With 8 envs the Ape-X epsilons are 0.2, 0.04, 0.008, ...: one env explores, the rest act
    almost greedily. Its short episodes count in the mean-100 return too (which is what the
    target reads), so a larger epsilon or more exploring envs delay the target.

    Every env's epsilon starts at 1 and falls to its own over the first 20k env steps: with the
    fixed epsilons alone 5 seeds reached 475 at 152k-214k env steps (median 159k), stalling for
    50k-100k steps at a mean-100 of 110-150; annealed, at 88k-123k (lr 1e-3), and with lr 2e-3
    at 73k-90k (median 84k; docs/results.md).
    """
    return ExperimentConfig(
        policy="q-mlp",
        policy_kwargs={"hidden_sizes": [128, 128]},
        dataflow=DataflowConfig(envs_per_actor=8, sample_length=16),
        replay=ReplayConfig(batch_size=128, replay_ratio=16.0),
        stop=StopConfig(total_env_steps=300_000, target_return=475.0),
        algorithm="dqn",
        algo=DQNConfig(lr=2e-3, target_update_interval=50, epsilon_anneal_env_steps=20_000),
    )
