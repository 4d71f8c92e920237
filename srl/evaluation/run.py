"""`srl eval RUN_DIR`: the run's latest checkpoint, acting for N episodes in one process.

The checkpoint is the newest of the run that loads into its policy with finite parameters; each
one passed over (truncated, of another run, NaN, outside checkpoints/) is named on one line.

With `video=FILE.mp4` the env is made with render_mode='rgb_array' and the frame of every step
goes to the file (srl.monitor.video), the episodes one after another.

`--against random` of a run that is not a turn-based game: the random policy plays the same
episodes (same seed) beside it, and both returns and their difference are reported. In a
turn-based game (`--against` anyone, srl.evaluation.opponents) it plays matches instead
(`score_against`: win / draw / loss, seats alternating). A run with several policies is
evaluated by srl.evaluation.policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from srl import checkpoint
from srl.api.policy import Policy
from srl.config import ConfigError, EnvWrapper, ExperimentConfig, load_saved_config
from srl.config.checks import build_config
from srl.envs import is_gymnasium_env, make_vector_env, single_env_kwargs
from srl.envs.central_state import AgentStateBox
from srl.evaluation.opponents import resolve_opponent
from srl.evaluation.play import play
from srl.evaluation.players import Actor, Player, RandomPlayer
from srl.graph import Graph, build_graph, make_policy
from srl.monitor.video import (
    FrameRecorder,
    check_renders_rgb_array,
    check_video_path,
    no_frames,
    rendering_env,
)

EVAL_RUN_DIR = "eval RUN_DIR"  # what names the directory in its errors (not run.resume=, whose function it shares)


def evaluate_run(
    run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True, video: str | Path | None = None
) -> dict[str, Any]:
    run_dir = Path(run_dir)
    _check_episodes(episodes)
    if video is not None:
        check_video_path(Path(video))
    config, graph, policy, state = _trained(run_dir)
    kwargs = single_env_kwargs(config.env_kwargs, config.env_backend)
    if video is not None:
        if not is_gymnasium_env(config.env):
            raise ConfigError(f"--video: env {config.env!r} is not a Gymnasium env (only those render rgb_array)")
        check_renders_rgb_array(config.env, kwargs)
        kwargs = {**kwargs, "render_mode": "rgb_array"}
    env = _make_env(config.env, kwargs, config.env_wrappers)
    recorder = None if video is None else FrameRecorder(Path(video), rendering_env(env, config.env), config.env)
    try:  # the state each action is chosen in goes to the video
        returns = _returns(play(env, [Player(policy, deterministic=deterministic)], episodes, seed,
                                before_step=None if recorder is None else recorder.capture))
    finally:
        env.close()
        if recorder is not None:
            recorder.close()
    result = {"run_dir": str(run_dir), "policy_version": state["version"], "episodes": episodes, **_stats("", returns)}
    if recorder is not None:
        result.update(video=str(video), video_frames=recorder.frames)
    return result


def evaluate_against(run_dir: str | Path, against: str, games: int, seed: int, episodes: int = 10,
                     deterministic: bool = True) -> dict[str, Any]:
    """`srl eval RUN_DIR --against WHO`: win / draw / loss of the run's policy in a turn-based
    game, seats alternating, against `random` (legal moves), `heuristic` (the game's scripted
    player), a registered scripted policy, a snapshot of the run's league (league.json), or a
    checkpoint file (srl.evaluation.opponents). Any other env: `random` only, as
    `against_random` plays it."""
    run_dir = Path(run_dir)
    config, graph, policy, state = _trained(run_dir)
    space = graph.observation_space
    if not (isinstance(space, AgentStateBox) and space.mask_dim):
        if against != "random":
            raise ConfigError(f"--against {against!r}: {config.env!r} is not a turn-based game; a run of one policy "
                              "plays only against random there (its returns beside a random policy's)")
        return {"run_dir": str(run_dir), "policy_version": state["version"],
                **against_random(config, graph, policy, episodes, seed, deterministic)}
    if games < 1:
        raise ConfigError(f"--games must be >= 1, got {games}")
    opponent = resolve_opponent(against, run_dir, config.env_kwargs.get("module"), space, graph.action_space, seed,
                                network=lambda: make_policy(config, space, graph.action_space))
    score = score_against(policy, config.env, config.env_kwargs, games, seed, opponent)
    return {"run_dir": str(run_dir), "policy_version": state["version"], "against": against, "games": games, **score}


def against_random(config: ExperimentConfig, graph: Graph, policy: Policy, episodes: int, seed: int,
                   deterministic: bool = True) -> dict[str, Any]:
    """The policy's returns and, on the same episodes (the same seed), a random policy's;
    `return_difference` = the first's mean less the second's (> 0: it learned something)."""
    _check_episodes(episodes)
    kwargs = single_env_kwargs(config.env_kwargs, config.env_backend)
    trained = _episode_returns(config, kwargs, Player(policy, deterministic=deterministic), episodes, seed)
    at_random = _episode_returns(config, kwargs, RandomPlayer(graph.observation_space, graph.action_space, seed),
                                 episodes, seed)
    return {"episodes": episodes, "against": "random", **_stats("", trained), **_stats("random_", at_random),
            "return_difference": float(np.mean(trained) - np.mean(at_random))}


def score_against(
    policy: Policy | None, env: str, env_kwargs: Mapping[str, Any], games: int, seed: int,
    opponent: Policy | None = None,
) -> dict[str, float]:
    """{"win", "draw", "loss"} fractions over `games` games of a turn-based 'pettingzoo-aec' game,
    one per env, all played at once. The policy plays one seat, rotating over the games (game g:
    seat g % agents) so first-move advantage averages out; a game is won if its seat ends with a
    positive return. `policy=None` measures a random player in its place (the baseline). The other
    seats play uniformly random legal moves, or `opponent` (a scripted player, a frozen snapshot)."""
    venv = make_vector_env(env, env_kwargs, num_envs=games, env_index_offset=0)
    space = venv.observation_space
    if not isinstance(space, AgentStateBox) or not space.mask_dim:
        venv.close()
        raise ValueError(f"score_against needs a turn-based 'pettingzoo-aec' env, {env!r} has {space}")
    agents = len(venv.agents)
    seat = np.arange(venv.num_rows) % agents == (np.arange(venv.num_rows) // agents) % agents  # game g: seat g % agents
    mine, theirs = np.flatnonzero(seat).tolist(), np.flatnonzero(~seat).tolist()
    try:
        players = [_seated(policy, mine, space, venv, seed), _seated(opponent, theirs, space, venv, seed + 1)]
        final = np.zeros(games)
        for episode in play(venv, players, games, seed):
            final[episode.env] = episode.returns[episode.env % agents]
    finally:
        venv.close()
    return {"win": float(np.mean(final > 0)), "draw": float(np.mean(final == 0)), "loss": float(np.mean(final < 0))}


def _seated(policy: Policy | None, rows: list[int], space: AgentStateBox, venv: Any, seed: int) -> Actor:
    """Who plays `rows`: `policy`, or a random player of legal moves."""
    if policy is None:
        return RandomPlayer(space, venv.action_space, seed, rows=rows)
    return Player(policy, rows=rows)


def _trained(run_dir: Path) -> tuple[ExperimentConfig, Graph, Policy, dict[str, Any]]:
    """The run's config, graph, and policy loaded from its newest usable checkpoint."""
    config = saved_config(run_dir)
    graph = build_graph(config)
    policy, _ = graph.checked_models()  # the policy build_graph checked, not another one
    state = checkpoint.load_latest(run_dir, config.run.run_id, apply=lambda s: policy.load_state_dict(s["policy"]))
    if state is None:
        raise ConfigError(f"{str(run_dir)!r}: {checkpoint.nothing_to_load(run_dir)}: nothing to evaluate")
    return config, graph, policy.eval(), state


def saved_config(run_dir: Path) -> ExperimentConfig:
    """The config the run in `run_dir` ran with, checked; a ConfigError names the directory where it
    holds none, its config.yaml where that does not hold a valid config."""
    values = load_saved_config(run_dir, named_by=EVAL_RUN_DIR)
    try:
        return build_config(values)
    except ConfigError as e:
        raise ConfigError(f"{run_dir / 'config.yaml'}: {e}") from None


def _episode_returns(config: ExperimentConfig, kwargs: dict[str, Any], player: Actor, episodes: int, seed: int
                     ) -> list[float]:
    env = _make_env(config.env, kwargs, config.env_wrappers)
    try:
        return _returns(play(env, [player], episodes, seed))
    finally:
        env.close()


def _returns(episodes: list[Any]) -> list[float]:
    """Each episode's mean return over its env's agents."""
    return [float(e.returns.mean()) for e in episodes]


def _stats(prefix: str, returns: list[float]) -> dict[str, Any]:
    return {f"{prefix}return_mean": float(np.mean(returns)), f"{prefix}return_std": float(np.std(returns)),
            f"{prefix}returns": returns}


def _check_episodes(episodes: int) -> None:
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")


def _make_env(name: str, kwargs: dict[str, Any], wrappers: list[EnvWrapper]):
    try:
        return make_vector_env(name, kwargs, num_envs=1, env_index_offset=0, wrappers=wrappers)
    except TypeError as e:  # an env class without metadata that does not take render_mode
        if "render_mode" not in kwargs or "render_mode" not in str(e):
            raise
        raise no_frames(name, "its constructor takes no render_mode") from None
