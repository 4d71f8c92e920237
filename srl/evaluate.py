"""`srl eval RUN_DIR`: the run's latest checkpoint, acting for N episodes in one process.

The checkpoint is the newest of the run that loads into its policy with finite parameters; each
one passed over (truncated, of another run, NaN, outside checkpoints/) is named on one line.

With `video=FILE.mp4` the env is made with render_mode='rgb_array' and the frame of every step
goes to the file (srl.monitor.video), the episodes one after another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from srl import checkpoint
from srl.api.policy import Policy
from srl.checks import build_config
from srl.config import ConfigError, EnvWrapper, ExperimentConfig, load_saved_config
from srl.envs import is_gymnasium_env, make_vector_env, single_env_kwargs
from srl.graph import Graph, build_graph, make_policy
from srl.monitor.video import (
    FrameRecorder,
    check_renders_rgb_array,
    check_video_path,
    no_frames,
    rendering_env,
)
from srl.spaces import map_obs
from srl.versus import score_against


def evaluate_run(
    run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True, video: str | Path | None = None
) -> dict[str, Any]:
    run_dir = Path(run_dir)
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
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
    try:
        returns = _play(env, policy, episodes, seed, deterministic, recorder)
    finally:
        env.close()
        if recorder is not None:
            recorder.close()
    result = {
        "run_dir": str(run_dir),
        "policy_version": state["version"],
        "episodes": episodes,
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "returns": returns,
    }
    if recorder is not None:
        result.update(video=str(video), video_frames=recorder.frames)
    return result


def _trained(run_dir: Path) -> tuple[ExperimentConfig, Graph, Policy, dict[str, Any]]:
    """The run's config, graph, and policy loaded from its newest usable checkpoint."""
    config = saved_config(run_dir)
    graph = build_graph(config)
    policy = make_policy(config, graph.observation_space, graph.action_space)
    state = checkpoint.load_latest(run_dir, config.run.run_id, apply=lambda s: policy.load_state_dict(s["policy"]))
    if state is None:
        raise ConfigError(f"{str(run_dir)!r}: {checkpoint.nothing_to_load(run_dir)}: nothing to evaluate")
    return config, graph, policy.eval(), state


EVAL_RUN_DIR = "eval RUN_DIR"  # what names the directory in its errors (not run.resume=, whose function it shares)


def saved_config(run_dir: Path) -> ExperimentConfig:
    """The config the run in `run_dir` ran with, checked; a ConfigError names the directory where it
    holds none, its config.yaml where that does not hold a valid config."""
    values = load_saved_config(run_dir, named_by=EVAL_RUN_DIR)
    try:
        return build_config(values)
    except ConfigError as e:
        raise ConfigError(f"{run_dir / 'config.yaml'}: {e}") from None


# the scripted player `--against heuristic` means, per turn-based game (env_kwargs.module)
HEURISTICS = {"pettingzoo.classic.connect_four_v3": "connect4-lookahead"}


def evaluate_against(run_dir: str | Path, against: str, games: int, seed: int) -> dict[str, Any]:
    """`srl eval RUN_DIR --against WHO`: win / draw / loss of the run's policy in a turn-based
    game, seats alternating, against `random` (legal moves), `heuristic` (the game's scripted
    player), a registered scripted policy, a snapshot of the run's league (league.json), or a
    checkpoint file."""
    run_dir = Path(run_dir)
    if games < 1:
        raise ConfigError(f"--games must be >= 1, got {games}")
    config, graph, policy, state = _trained(run_dir)
    opponent = None if against == "random" else _opponent(against, config, graph, run_dir, seed)
    score = score_against(policy, config.env, config.env_kwargs, games, seed, opponent)
    return {"run_dir": str(run_dir), "policy_version": state["version"], "against": against, "games": games, **score}


def scripted_player(against: str, game: Any, observation_space: gym.Space, action_space: gym.Space, seed: int,
                    otherwise: str) -> Policy | None:
    """The scripted player `--against` names: `heuristic` (the game's, HEURISTICS) or a registered
    scripted policy; None where it names neither. `otherwise`: what else the caller takes."""
    from srl.api import registry
    from srl.models.scripted import is_scripted

    name = against
    if against == "heuristic":
        if game not in HEURISTICS:
            raise ConfigError(f"--against heuristic: no heuristic player for {game!r} (known: "
                              f"{', '.join(HEURISTICS)}); try random or {otherwise}")
        name = HEURISTICS[game]
    factory = registry.policies.get(name) if name in registry.policies else None
    if not is_scripted(factory):
        return None
    try:
        return factory(observation_space, action_space, seed=seed)
    except TypeError as e:  # a player of another game
        raise ConfigError(f"--against {against}: {e}") from None


def _opponent(against: str, config: ExperimentConfig, graph: Graph, run_dir: Path, seed: int) -> Policy:
    from srl.league import League

    player = scripted_player(against, config.env_kwargs.get("module"), graph.observation_space, graph.action_space,
                             seed, otherwise="a snapshot")
    if player is not None:
        return player
    league_file = run_dir / "league.json"
    snapshots = League.load(league_file).snapshots if league_file.is_file() else {}
    path = run_dir / snapshots[against].checkpoint if against in snapshots else Path(against)
    if not path.is_file():
        raise ConfigError(f"--against {against!r}: not random, heuristic, a scripted player, a snapshot in "
                          f"{league_file} ({', '.join(snapshots) or 'none'}) or a checkpoint file")
    opponent = make_policy(config, graph.observation_space, graph.action_space)
    checkpoint.load_file(path, apply=lambda s: opponent.load_state_dict(s["policy"]))
    return opponent.eval()


def _make_env(name: str, kwargs: dict[str, Any], wrappers: list[EnvWrapper]):
    try:
        return make_vector_env(name, kwargs, num_envs=1, env_index_offset=0, wrappers=wrappers)
    except TypeError as e:  # an env class without metadata that does not take render_mode
        if "render_mode" not in kwargs or "render_mode" not in str(e):
            raise
        raise no_frames(name, "its constructor takes no render_mode") from None


def _play(env, policy, episodes: int, seed: int, deterministic: bool, recorder: FrameRecorder | None) -> list[float]:
    obs = env.reset(seed=seed)
    returns: list[float] = []
    running = np.zeros(env.num_rows)
    while len(returns) < episodes:
        if recorder is not None:
            recorder.capture()  # the state the action is chosen in
        with torch.inference_mode():
            tensors = map_obs(torch.from_numpy, obs)  # one tensor, or one per leaf (srl.spaces)
            action = policy.rollout(tensors, deterministic=deterministic)["action"].numpy()
        step = env.step(action)
        policy.episodes_ended(step.terminated | step.truncated)  # a recurrent policy starts those rows over
        running += step.reward
        obs = step.obs
        if (step.terminated | step.truncated).any():  # one env: every row ends together
            returns.append(float(running.mean()))
            running[:] = 0
    return returns
