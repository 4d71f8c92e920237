"""Built-in multi-agent experiments: MAPPO and QMIX on MPE simple_spread, predators and prey on MPE
simple_tag (two policies), a connect four learner against its self-play league, PPO self-play on
tictactoe."""

from __future__ import annotations

from srl.algos.ppo import PPOConfig
from srl.algos.qmix import QMIXConfig
from srl.api.registry import register_experiment
from srl.config import (
    DataflowConfig,
    ExperimentConfig,
    LaunchConfig,
    LeagueSpec,
    PolicySpec,
    ReplayConfig,
    RunConfig,
    StopConfig,
)

SPREAD_KWARGS = {
    "module": "mpe2.simple_spread_v3",
    "N": 3,
    "local_ratio": 0.5,
    "max_cycles": 25,
    "continuous_actions": False,
}


def paper_spread_return(per_agent_return: float, agents: int = 3, steps: int = 25) -> float:
    """The MAPPO paper's "average episode reward" on simple_spread, from srl's per-agent return.

    The paper's MPE code gives every agent the team's summed reward, each agent's share being
    -(the nearest agent's distance, summed over landmarks) - (agents it touches, itself included:
    a constant -1). PettingZoo with local_ratio 0.5 gives agent i 0.5 * -(others it touches) +
    0.5 * -(the same distance sum), so per step paper = 2 * sum_i r_i - agents, and over an
    episode paper = 2 * agents * per_agent_return - agents * steps (tests/test_mappo.py checks it).
    """
    return 2.0 * agents * per_agent_return - agents * steps


@register_experiment("mpe-mappo")
def mpe_mappo() -> ExperimentConfig:
    """MAPPO (Yu et al., 2022) on PettingZoo MPE simple_spread (3 agents, 3 landmarks, 25 steps).

    Each agent acts on its own observation; the critic reads all three (the "pettingzoo-mappo"
    env puts the global state in every row). One shared policy by default; separate ones with
    policy_kwargs.policy_groups, e.g. {"agent_0": "a", "agent_": "b"}. Hyperparameters follow
    the paper's MPE settings (lr 7e-4, gamma 0.99, lambda 0.95, entropy 0.01, 64x64 tanh MLPs)
    with fewer parallel envs. `episode_return_mean` is the mean *per-agent* return (the paper
    reports the same quantity per agent: the sum over agents is 3 times it).
    """
    return ExperimentConfig(
        env="pettingzoo-mappo",
        env_kwargs=dict(SPREAD_KWARGS),
        policy="mappo",
        policy_kwargs={"hidden_sizes": [64, 64], "policy_groups": {}},
        dataflow=DataflowConfig(sample_length=25, segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=2_000_000),
        algorithm="ppo",
        algo=PPOConfig(lr=7e-4, anneal_lr=False, gamma=0.99, gae_lambda=0.95, entropy_coef=0.01, max_grad_norm=10.0),
    )


@register_experiment("mpe-spread-qmix")
def mpe_spread_qmix() -> ExperimentConfig:
    """QMIX (Rashid et al., 2018) on the simple_spread of mpe-mappo: the three agents share one
    Q-network over their own observation and id (policy agent-q) and act alone on it; a mixing
    network of the global state (MPE's state(): every agent's observation) combines their Qs
    into the team's, trained on the team's summed reward from a replay of team transitions
    (srl.data.team). algo.mixer=vdn trains VDN (a sum, no state) instead. Every env explores with
    epsilon 1 at first, annealed over 20k env steps to its Ape-X epsilon (0.1 down to 0.01); all
    agents of an env share theirs. gamma 0.95: a 25-step episode needs no longer horizon, and
    0.99's larger values learned far slower here. Uniform replay, as in the QMIX paper: with
    prioritized replay one seed of three diverged (TD errors and gradients growing tenfold).
    `episode_return_mean` is per agent, as in mpe-mappo.
    """
    return ExperimentConfig(
        env="pettingzoo-mappo",
        env_kwargs=dict(SPREAD_KWARGS),
        policy="agent-q",
        policy_kwargs={"hidden_sizes": [64, 64]},
        dataflow=DataflowConfig(envs_per_actor=8, sample_length=25),
        replay=ReplayConfig(capacity=100_000, batch_size=128, prioritized=False, n_step=3, gamma=0.95, warmup=2_000,
                            replay_ratio=16.0),
        stop=StopConfig(total_env_steps=1_000_000),
        algorithm="qmix",
        algo=QMIXConfig(lr=5e-4, target_update_interval=200, epsilon=0.1, epsilon_alpha=2.0,
                        epsilon_anneal_env_steps=20_000),
    )


TAG_KWARGS = {"module": "mpe2.simple_tag_v3", "num_good": 1, "num_adversaries": 3, "num_obstacles": 2,
              "max_cycles": 25, "continuous_actions": False}


@register_experiment("mpe-tag")
def mpe_tag() -> ExperimentConfig:
    """PettingZoo MPE simple_tag: three predators (adversary_*) chase one faster prey (agent_0)
    among two obstacles, 25 steps an episode. Two policies trained at once, each with its own
    trainer and parameters (srl.graph.lanes): a predator scores 10 for every touch of the prey by any
    predator; the prey loses 10 for each and is penalised for leaving the arena.

    `srl eval RUN_DIR --against random` plays each policy against random opponents beside
    all-random episodes: trained predators touch random prey more often than random predators do,
    and random predators touch the trained prey less often than they touch random prey
    (docs/multiagent.md has the figures). PPO with the MPE settings of mpe-mappo for both.
    """
    return ExperimentConfig(
        env="pettingzoo",
        env_kwargs=dict(TAG_KWARGS),
        policy_kwargs={"hidden_sizes": [64, 64]},
        policies={"predator": PolicySpec(), "prey": PolicySpec()},
        policy_mapping={"adversary_*": "predator", "agent_*": "prey"},
        dataflow=DataflowConfig(sample_length=25, segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=1_000_000),
        algorithm="ppo",
        algo=PPOConfig(lr=7e-4, anneal_lr=False, gamma=0.99, gae_lambda=0.95, entropy_coef=0.01, max_grad_norm=10.0),
    )


@register_experiment("connect4-league")
def connect4_league() -> ExperimentConfig:
    """PettingZoo connect_four: a learner (PPO, the mappo network) against a self-play league of its
    own snapshots. The two sides change seats every episode (env_kwargs.sides); a snapshot of the
    learner's newest checkpoint joins the pool every 20 updates and replaces the one before it,
    beside two scripted opponents that never leave it (random legal moves and the one-step
    lookahead): self-play alone settled into lines that beat its own snapshots and lost to the
    lookahead, and a pool of one snapshot (not 2 or 5) met both of the bars in docs/multiagent.md.
    Opponents are drawn per episode weighted toward those the learner loses to, and league.json
    rates every one (srl leaderboard RUN_DIR). `srl eval RUN_DIR --snapshot best --against heuristic`
    plays the best rated snapshot against the one-step lookahead (win if it can, block if it must).
    """
    return ExperimentConfig(
        env="pettingzoo-aec",
        env_kwargs={"module": "pettingzoo.classic.connect_four_v3", "sides": ["learner", "league"]},
        policy="mappo",
        policy_kwargs={"hidden_sizes": [128, 128]},
        policies={"learner": PolicySpec(), "league": PolicySpec(league=LeagueSpec(
            of="learner", snapshot_interval_updates=20, pool_size=1, scripted=["random-legal", "connect4-lookahead"]))},
        policy_mapping={"learner": "learner", "league": "league"},
        run=RunConfig(checkpoint_interval_s=10.0),
        launch=LaunchConfig(num_actor_workers=2),
        dataflow=DataflowConfig(envs_per_actor=32, sample_length=16, segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=4_000_000),
        algorithm="ppo",
        algo=PPOConfig(anneal_lr=False, gamma=0.99, gae_lambda=0.95, epochs=4, num_minibatches=4, entropy_coef=0.01),
    )


@register_experiment("tictactoe-ppo")
def tictactoe_ppo() -> ExperimentConfig:
    """Self-play PPO on PettingZoo's turn-based tictactoe_v3, one policy shared by both players.

    Each srl step is one move: the waiting player's row is marked inactive by its all-zero action
    mask, so only the mover's transition trains the actor, and a loss reaches the loser on the
    winner's move and is credited to the loser's last move (srl.algos.gae). Self-play returns
    average 0 (one player's win is the other's loss); `srl.evaluate`-style win rates against a
    random player are what tests/test_turns.py checks.
    """
    return ExperimentConfig(
        env="pettingzoo-aec",
        env_kwargs={"module": "pettingzoo.classic.tictactoe_v3"},
        policy="mappo",
        policy_kwargs={"hidden_sizes": [64, 64]},
        dataflow=DataflowConfig(envs_per_actor=32, sample_length=16, segment_slots=1, max_policy_lag=5),
        stop=StopConfig(total_env_steps=300_000),
        algorithm="ppo",
        algo=PPOConfig(anneal_lr=False, gamma=0.99, gae_lambda=0.95, epochs=4, num_minibatches=4,
                       entropy_coef=0.01),
    )
