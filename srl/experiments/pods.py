"""Built-in experiments: Pods (ElegantRL-podracer style): batched envs stepped and trained in one process, and their tournament ensemble."""

from __future__ import annotations

from srl.algos.ppo import PPOConfig
from srl.api.registry import register_experiment
from srl.config import (
    DataflowConfig,
    EnsembleConfig,
    ExperimentConfig,
    LaunchConfig,
    MonitorConfig,
    PodConfig,
    StopConfig,
)


@register_experiment("cartpole-pod")
def cartpole_pod() -> ExperimentConfig:
    """Batched CartPole stepped and trained in one pod process (ElegantRL-podracer style).

    Tuned for wall time from launch to a mean-100 return of 475 on a 2-core CPU (one torch
    thread): 128 envs x 16 steps = 2048 transitions per update, 4 epochs of 2 minibatches, a
    high constant learning rate. A gradient step on <= 1024 rows costs about the same whatever
    its size (per-op overhead), so few, large minibatches win; 4 epochs reach 475 in ~150k env
    steps where 2 took ~250k (seeds 1-8). The pod is the only worker, so it runs in the
    launching process (`launch.launcher=inline`: no second torch import), and reports every 0.25 s so
    that the stop at the target is not a second late.
    """
    return ExperimentConfig(
        env="batched-cartpole",
        policy_kwargs={"hidden_sizes": [32, 32]},
        launch=LaunchConfig(launcher="inline"),
        dataflow=DataflowConfig(envs_per_actor=128, sample_length=16),
        stop=StopConfig(total_env_steps=2_000_000, target_return=475.0),
        monitor=MonitorConfig(log_interval_s=0.25),
        pod=PodConfig(enabled=True),
        algorithm="ppo",
        algo=PPOConfig(lr=0.01, anneal_lr=False, gamma=0.99, gae_lambda=0.95, epochs=4, num_minibatches=2),
    )


@register_experiment("cartpole-pod-gpu")
def cartpole_pod_gpu() -> ExperimentConfig:
    """cartpole-pod for a GPU (`pod.device=auto`: CUDA where there is one; the CPU runs it too, slowly):
    1,024 envs x 16 steps = 16,384 transitions per update, the rollout and the update captured as
    CUDA graphs (`pod.cuda_graphs=auto`), nothing read back inside an iteration (srl.workers.pod).

    On a GPU an iteration costs its kernel count, not its batch (2,267 kernels in 6.7 ms on an H200,
    graphs on): tuned on the CPU (one torch thread, seeds 1-4) for few updates to a mean-100 return
    of 475: lr 0.03 took 36-41 updates (0.59-0.67M env steps), 0.02 took 40-53 and 0.01 53-72;
    2,048 envs took as many updates as 1,024 for twice the env steps, one minibatch 3x the updates.
    Reports every 0.1 s: each is one read of the device, and the stop comes from one.
    """
    config = cartpole_pod()
    config.pod.device = "auto"
    config.dataflow.envs_per_actor = 1024
    config.stop.total_env_steps = 20_000_000
    config.monitor.log_interval_s = 0.1
    config.algo = PPOConfig(lr=0.03, anneal_lr=False, gamma=0.99, gae_lambda=0.95, epochs=4, num_minibatches=2)
    return config


@register_experiment("cartpole-pod-ensemble")
def cartpole_pod_ensemble() -> ExperimentConfig:
    """cartpole-pod as a tournament of 4 pods (ElegantRL-podracer's ensemble): each member is
    evaluated every 8 updates; the worst-ranked one, once it has had 2 evaluations, becomes a
    copy of the leaderboard's best with its learning rate x0.8 or x1.25, if its evaluation is more
    than 20 below the best member's (16 greedy episodes: smaller gaps are mostly noise). Stops when any member's
    last 100 episodes reach 475; `srl leaderboard RUN_DIR` prints the table.
    """
    config = cartpole_pod()
    config.launch.launcher = "local"  # each member a process of its own
    config.monitor.log_interval_s = 1.0
    config.stop.total_env_steps = 4_000_000
    config.pod.ensemble = EnsembleConfig(population=4, eval_interval_updates=8, eval_episodes=16, margin=20.0)
    return config


@register_experiment("pendulum-pod")
def pendulum_pod() -> ExperimentConfig:
    """Batched Pendulum-v1 (continuous torque) stepped and trained in one pod process.

    128 envs x 64 steps per update, 10 epochs of 8 minibatches, gamma 0.9 (the swing-up pays
    off within ~20 steps; longer horizons only add variance), lr 1e-3 decayed to 1e-4 over
    800k env steps: the constant rate climbs as fast but then wobbles around -240.
    """
    return ExperimentConfig(
        env="batched-pendulum",
        policy_kwargs={"hidden_sizes": [64, 64]},
        dataflow=DataflowConfig(envs_per_actor=128, sample_length=64),
        stop=StopConfig(total_env_steps=2_000_000, target_return=-200.0),
        pod=PodConfig(enabled=True),
        algorithm="ppo",
        algo=PPOConfig(anneal_env_steps=800_000, final_lr_fraction=0.1, gamma=0.9, gae_lambda=0.95,
                       num_minibatches=8),
    )


@register_experiment("spread-pod")
def spread_pod() -> ExperimentConfig:
    """The batched cooperative navigation task (3 agents, 3 landmarks, 25-step episodes) in one
    pod: one shared actor-critic acts for every agent row (parameter sharing), rewards shared.
    No target: a random policy scores about -49 per agent-episode; see docs/benchmarks.md.
    """
    return ExperimentConfig(
        env="batched-spread",
        policy_kwargs={"hidden_sizes": [64, 64]},
        dataflow=DataflowConfig(envs_per_actor=128, sample_length=25),
        pod=PodConfig(enabled=True),
        algorithm="ppo",
        algo=PPOConfig(anneal_lr=False, gamma=0.95, gae_lambda=0.95, epochs=4, num_minibatches=4),
    )
