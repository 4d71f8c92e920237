"""Built-in experiments: each a function returning its config values (overrides go on top)."""

from __future__ import annotations

from typing import Any

from srl.api.registry import register_experiment


@register_experiment("cartpole-pod")
def cartpole_pod() -> dict[str, Any]:
    """Batched CartPole stepped and trained in one pod process (ElegantRL-podracer style).

    Tuned for wall time from launch to a mean-100 return of 475 on a 2-core CPU (one torch
    thread): 128 envs x 16 steps = 2048 transitions per update, 4 epochs of 2 minibatches, a
    high constant learning rate. A gradient step on <= 1024 rows costs about the same whatever
    its size (per-op overhead), so few, large minibatches win; 4 epochs reach 475 in ~150k env
    steps where 2 took ~250k (seeds 1-8). The pod is the only worker, so it runs in the
    launching process (`launcher=inline`: no second torch import), and reports every 0.25 s so
    that the stop at the target is not a second late.
    """
    return {
        "env": "batched-cartpole",
        "pod": True,
        "launcher": "inline",
        "log_interval_s": 0.25,
        "envs_per_actor": 128,
        "ring_splits": 1,
        "sample_length": 16,
        "total_env_steps": 2_000_000,
        "target_return": 475.0,
        "policy_kwargs": {"hidden_sizes": [32, 32]},
        "algorithm": "ppo",
        "algo": {"lr": 0.01, "anneal_lr": False, "gamma": 0.99, "gae_lambda": 0.95,
                 "epochs": 4, "num_minibatches": 2, "clip_value": False},
    }


@register_experiment("cartpole-ppo")
def cartpole_ppo() -> dict[str, Any]:
    """CartPole-v1 with PPO on the local launcher, tuned for wall time to a mean return of 475.

    Inference runs inline in the actor: a 64x64 MLP acts on 16 rows in ~80 us, less than a round
    trip to a policy worker, and on 2 cores the trainer needs the other core. With a GPU or a large
    network, `inference=policy_worker` batches requests across actors instead. The trainer is the
    bottleneck here, so one segment slot per group is enough to keep it fed and holds the policy
    lag to one version (two slots: two versions and ~30% more env steps to the target).
    """
    return {
        "env": "CartPole-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 16,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 32,
        "segment_slots": 1,  # the actor fills the next segment while the trainer updates: lag <= 1
        "batch_segments": 1,
        "max_policy_lag": 5,
        "total_env_steps": 500_000,
        "target_return": 475.0,
        "algorithm": "ppo",
        "algo": {
            "lr": 1e-3,
            "anneal_env_steps": 150_000,
            "final_lr_fraction": 0.1,  # a run that is late at 150k steps keeps learning
            "gamma": 0.98,
            "gae_lambda": 0.8,
            "epochs": 10,
            "num_minibatches": 1,
            "clip_value": False,
        },
    }


@register_experiment("cartpole-appo")
def cartpole_appo() -> dict[str, Any]:
    """CartPole-v1 with asynchronous PPO (V-trace targets) on the local launcher.

    Unlike cartpole-ppo, actors run ahead of the trainer: two ring groups with two segment slots
    each, so samples arrive up to a few versions old and V-trace plus the clipped ratio correct for
    that lag instead of the trainer dropping the segments.
    """
    return {
        "env": "CartPole-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 16,
        "ring_splits": 2,
        "inference": "inline",
        "sample_length": 32,
        "segment_slots": 2,
        "batch_segments": 2,
        "max_policy_lag": 8,
        "total_env_steps": 500_000,
        "target_return": 475.0,
        "algorithm": "appo",
        "algo": {
            "lr": 1e-3,
            "anneal_env_steps": 150_000,
            "final_lr_fraction": 0.1,
            "gamma": 0.98,
            "vtrace_lambda": 0.9,
            "clip_ratio": 0.2,
            "epochs": 10,
            "num_minibatches": 1,
        },
    }


@register_experiment("acrobot-ppo")
def acrobot_ppo() -> dict[str, Any]:
    """Acrobot-v1 with PPO to a mean-100 return of -100 (-1 per step until the tip swings up).

    Rewards are sparse-ish (every step costs the same), so a longer horizon than CartPole's
    (gamma 0.99, lambda 0.95) and a little entropy keep exploring until the first swing-ups.
    """
    return {
        "env": "Acrobot-v1",
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
        "target_return": -100.0,
        "algorithm": "ppo",
        "algo": {
            "lr": 1e-3,
            "anneal_env_steps": 300_000,
            "final_lr_fraction": 0.1,
            "gamma": 0.99,
            "gae_lambda": 0.95,
            "epochs": 4,
            "num_minibatches": 4,
            "entropy_coef": 0.01,
            "clip_value": False,
        },
    }


@register_experiment("cartpole-dqn")
def cartpole_dqn() -> dict[str, Any]:
    """CartPole-v1 with DQN / Ape-X: actors with per-env epsilons, a prioritized n-step replay
    buffer worker, a double-DQN trainer.

    With 8 envs the Ape-X epsilons are 0.2, 0.04, 0.008, ...: one env explores, the rest act
    almost greedily. Its short episodes count in the mean-100 return too (which is what the
    target reads), so a larger epsilon or more exploring envs delay the target.
    """
    return {
        "env": "CartPole-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 8,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 16,
        "segment_slots": 2,
        "total_env_steps": 300_000,
        "target_return": 475.0,
        "policy": "q-mlp",
        "policy_kwargs": {"hidden_sizes": [128, 128]},
        "epsilon": 0.2,
        "epsilon_alpha": 7.0,
        # 16 transitions sampled per transition stored: one update of 128 per 8 env steps
        "replay": {"capacity": 100_000, "batch_size": 128, "n_step": 3, "gamma": 0.99, "warmup": 1_000,
                   "replay_ratio": 16.0},
        "algorithm": "dqn",
        "algo": {"lr": 1e-3, "target_update_interval": 50},
    }


@register_experiment("pendulum-sac")
def pendulum_sac() -> dict[str, Any]:
    """Pendulum-v1 with SAC: a uniform 1-step replay buffer worker, twin critics, auto temperature."""
    return {
        "env": "Pendulum-v1",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 4,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 16,
        "segment_slots": 2,
        "total_env_steps": 100_000,
        "target_return": -200.0,
        "policy": "squashed-gaussian-mlp",
        "policy_kwargs": {"hidden_sizes": [64, 64]},
        "replay": {"capacity": 100_000, "batch_size": 256, "prioritized": False, "n_step": 1, "gamma": 0.99,
                   "warmup": 1_000, "replay_ratio": 128.0},
        "algorithm": "sac",
        "algo": {"actor_lr": 1e-3, "critic_lr": 1e-3, "alpha_lr": 1e-3, "critic_hidden_sizes": [64, 64]},
    }


@register_experiment("halfcheetah-sac")
def halfcheetah_sac() -> dict[str, Any]:
    """MuJoCo HalfCheetah-v5 with SAC and the usual hyperparameters (Haarnoja et al., 2018;
    CleanRL's sac_continuous_action): one env, 256x256 actor and critics, Adam 3e-4 (actor and
    critics; 1e-3 for the temperature), batch 256, tau 0.005, gamma 0.99, uniform 1-step replay of
    1M transitions, 5k transitions stored before the first update, then one update per env step
    (replay ratio 256 = batch size). Needs the [mujoco] extra. Episodes are 1000 steps long;
    published SAC reaches ~10k return in 1M env steps, which takes hours on a CPU.
    """
    return {
        "env": "HalfCheetah-v5",
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 1,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 8,
        "segment_slots": 2,
        "total_env_steps": 1_000_000,
        "policy": "squashed-gaussian-mlp",
        "policy_kwargs": {"hidden_sizes": [256, 256]},
        "replay": {"capacity": 1_000_000, "batch_size": 256, "prioritized": False, "n_step": 1, "gamma": 0.99,
                   "warmup": 5_000, "replay_ratio": 256.0},
        "algorithm": "sac",
        "algo": {"actor_lr": 3e-4, "critic_lr": 3e-4, "alpha_lr": 1e-3, "tau": 0.005,
                 "critic_hidden_sizes": [256, 256]},
    }


@register_experiment("cartpole-pod-ensemble")
def cartpole_pod_ensemble() -> dict[str, Any]:
    """cartpole-pod as a tournament of 4 pods (ElegantRL-podracer's ensemble): each member is
    evaluated every 8 updates; the worst-ranked one, once it has had 2 evaluations, becomes a
    copy of the leaderboard's best with its learning rate x0.8 or x1.25, if its evaluation is more
    than 20 below the best member's (16 greedy episodes: smaller gaps are mostly noise). Stops when any member's
    last 100 episodes reach 475; `srl leaderboard RUN_DIR` prints the table.
    """
    return {
        **cartpole_pod(),
        "launcher": "local",  # each member a process of its own
        "log_interval_s": 1.0,
        "total_env_steps": 4_000_000,
        "ensemble": {"population": 4, "eval_interval_updates": 8, "eval_episodes": 16, "ready_evals": 2,
                     "lag_fraction": 0.25, "margin": 20.0, "perturb": ["lr"]},
    }


@register_experiment("pendulum-pod")
def pendulum_pod() -> dict[str, Any]:
    """Batched Pendulum-v1 (continuous torque) stepped and trained in one pod process.

    128 envs x 64 steps per update, 10 epochs of 8 minibatches, gamma 0.9 (the swing-up pays
    off within ~20 steps; longer horizons only add variance), lr 1e-3 decayed to 1e-4 over
    800k env steps: the constant rate climbs as fast but then wobbles around -240.
    """
    return {
        "env": "batched-pendulum",
        "pod": True,
        "envs_per_actor": 128,
        "ring_splits": 1,
        "sample_length": 64,
        "total_env_steps": 2_000_000,
        "target_return": -200.0,
        "policy_kwargs": {"hidden_sizes": [64, 64]},
        "algorithm": "ppo",
        "algo": {"lr": 1e-3, "anneal_lr": True, "anneal_env_steps": 800_000, "final_lr_fraction": 0.1,
                 "gamma": 0.9, "gae_lambda": 0.95, "epochs": 10, "num_minibatches": 8, "clip_value": False},
    }


@register_experiment("spread-pod")
def spread_pod() -> dict[str, Any]:
    """The batched cooperative navigation task (3 agents, 3 landmarks, 25-step episodes) in one
    pod: one shared actor-critic acts for every agent row (parameter sharing), rewards shared.
    No target: a random policy scores about -49 per agent-episode; see docs/benchmarks.md.
    """
    return {
        "env": "batched-spread",
        "pod": True,
        "envs_per_actor": 128,
        "ring_splits": 1,
        "sample_length": 25,
        "total_env_steps": 1_000_000,
        "policy_kwargs": {"hidden_sizes": [64, 64]},
        "algorithm": "ppo",
        "algo": {"lr": 1e-3, "anneal_lr": False, "gamma": 0.95, "gae_lambda": 0.95, "epochs": 4,
                 "num_minibatches": 4, "clip_value": False},
    }


@register_experiment("pong-ppo")
def pong_ppo() -> dict[str, Any]:
    """ALE/Pong-v5 with PPO and the Nature CNN, with the Atari PPO hyperparameters of the PPO paper
    (and CleanRL's ppo_atari): 8 envs x 128 steps per update, 4 epochs of 4 minibatches, lr 2.5e-4
    annealed to 0 over 10M env steps, clip 0.1, entropy 0.01, gamma 0.99, lambda 0.95, 4 stacked
    84x84 grey frames (srl.envs.atari). Sticky actions are off, as in the PPO paper's and CleanRL's
    NoFrameskip-v4 runs that these settings come from; `env_kwargs.repeat_action_probability=0.25`
    restores the v5 default (Machado et al.'s harder protocol). With `env_backend=envpool` EnvPool
    steps the 8 envs. The CNN trunk computes in bfloat16 where the hardware has bfloat16 units
    (trunk_precision=auto).
    """
    return {
        "env": "ALE/Pong-v5",
        # sticky actions off: with v5's 0.25 seed 1 reached 12.1 in 10M env steps, without them 18
        # in 2.4M (docs/results.md)
        "env_kwargs": {"frame_stack": 4, "repeat_action_probability": 0.0},
        "policy": "actor-critic-cnn",
        # bfloat16 convolutions where the CPU or GPU has bfloat16 units (float32 weights and
        # heads): a minibatch update about 1.6x faster on an AVX512-BF16 CPU (docs/benchmarks.md)
        "policy_kwargs": {"trunk_precision": "auto"},
        "launcher": "local",
        "num_actor_workers": 1,
        "envs_per_actor": 8,
        "ring_splits": 1,
        "inference": "inline",
        "sample_length": 128,
        "segment_slots": 1,
        "batch_segments": 1,
        "max_policy_lag": 5,
        "heartbeat_timeout_s": 120.0,
        "trainer_torch_threads": 2,  # the CNN update is most of the run's work; the actor needs little
        "total_env_steps": 10_000_000,
        "target_return": 20.0,
        "algorithm": "ppo",
        "algo": {
            "lr": 2.5e-4,
            "anneal_env_steps": 10_000_000,
            "final_lr_fraction": 0.0,
            "gamma": 0.99,
            "gae_lambda": 0.95,
            "clip_coef": 0.1,
            "clip_value": True,
            "value_clip_coef": 0.1,
            "entropy_coef": 0.01,
            "value_coef": 0.5,
            "epochs": 4,
            "num_minibatches": 4,
            "max_grad_norm": 0.5,
        },
    }


# last: they register experiments built from the helpers above (mpe-mappo, tictactoe-ppo, the recurrent ones)
from srl.experiments import minigrid, multiagent, recurrent  # noqa: E402,F401
