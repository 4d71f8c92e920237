"""What `srl eval` plays with a run's policies (srl.evaluation.trained), lane by lane: a run of one
policy is one lane, so each way of playing is written once for one policy and for several.

- `together`: every lane's policy acting in one env for N episodes (with `video=FILE.mp4`, the
  env is made with render_mode='rgb_array' and the frame of every step goes to the file,
  srl.monitor.video); each lane's returns.
- `each_against`: each lane in turn, its policy playing against what `--against` names in every
  other lane (srl.evaluation.opponents), beside the same episodes (the same seed) with a random
  player in its place: a trained predator should catch more than a random one does, a trained prey
  be caught less. A run of one policy has no other lane: `--against random` gives its returns
  beside a random policy's.
- `score_against`: one policy in every seat of a turn-based game plays matches against an
  opponent, its seat rotating over the games (win / draw / loss).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from srl.api.policy import Policy
from srl.config import ConfigError, EnvWrapper
from srl.envs import is_gymnasium_env, make_vector_env, single_env_kwargs
from srl.envs.central_state import AgentStateBox
from srl.evaluation.play import play
from srl.evaluation.players import ALL_ROWS, Actor, Player, RandomPlayer
from srl.evaluation.trained import Trained
from srl.graph import Lane
from srl.monitor.video import FrameRecorder, check_renders_rgb_array, no_frames, rendering_env


def together(run: Trained, episodes: int, seed: int, deterministic: bool, video: Path | None = None
             ) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Each lane's returns, every lane's policy acting; and with `video`, the file and its frame
    count (one video of the whole env)."""
    played, frames = _play(run, run.policies, episodes, seed, deterministic, video)
    recorded = {} if video is None else {"video": str(video), "video_frames": frames}
    return {lane.name: _stats("", played[lane.name], game=len(run.lanes) > 1) for lane in run.lanes}, recorded


def each_against(run: Trained, against: str, episodes: int, seed: int, deterministic: bool
                 ) -> dict[str, dict[str, Any]]:
    """Each lane's returns against `against` in every other lane, beside a random player's in its
    place (the same episodes); `return_difference` = the first's mean less the second's (> 0: it
    learned something)."""
    if len(run.lanes) == 1 and against != "random":
        raise ConfigError(f"--against {against!r}: {run.graph.config.env!r} is not a turn-based game; a run of one "
                          "policy plays only against random there (its returns beside a random policy's)")
    result = {}
    for lane in run.lanes:
        others = {other.name: run.opponent(against, other, seed) for other in run.lanes if other is not lane}
        mine, _ = _play(run, {lane.name: run.policies[lane.name], **others}, episodes, seed, deterministic)
        instead, _ = _play(run, others, episodes, seed, deterministic)  # a random player in its place
        result[lane.name] = {**_stats("", mine[lane.name], game=bool(others)), **_stats("random_", instead[lane.name]),
                             "return_difference": float(np.mean(mine[lane.name]) - np.mean(instead[lane.name]))}
        if others:
            result[lane.name]["opponents"] = {name: _stats("", mine[name], game=True) for name in others}
    return result


def matches(run: Trained, against: str, games: int, seed: int) -> dict[str, float]:
    """The run's one policy in a turn-based game against `against`, seats alternating."""
    if games < 1:
        raise ConfigError(f"--games must be >= 1, got {games}")
    opponent = run.opponent(against, run.lanes[0], seed)
    c = run.graph.config
    return score_against(run.policies[run.lanes[0].name], c.env, c.env_kwargs, games, seed, opponent)


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


def _play(run: Trained, policies: Mapping[str, Policy | None], episodes: int, seed: int, deterministic: bool,
          video: Path | None = None) -> tuple[dict[str, list[float]], int]:
    """Each lane's mean return per agent, episode by episode (lanes not in `policies` act at random),
    and the frames that went to `video`: every step's state acted in."""
    c = run.graph.config
    kwargs = single_env_kwargs(c.env_kwargs, c.env_backend)
    if video is not None:
        if not is_gymnasium_env(c.env):
            raise ConfigError(f"--video: env {c.env!r} is not a Gymnasium env (only those render rgb_array)")
        check_renders_rgb_array(c.env, kwargs)
        kwargs = {**kwargs, "render_mode": "rgb_array"}
    env = make_env(c.env, kwargs, c.env_wrappers)
    recorder = None if video is None else FrameRecorder(video, rendering_env(env, c.env), c.env)
    players = [_player(run, lane, policies.get(lane.name), seed, deterministic) for lane in run.lanes]
    try:
        played = play(env, players, episodes, seed, before_step=None if recorder is None else recorder.capture)
    finally:
        env.close()
        if recorder is not None:
            recorder.close()
    returns = {lane.name: [float(e.returns[list(lane.rows)].mean()) for e in played] for lane in run.lanes}
    return returns, 0 if recorder is None else recorder.frames


def _player(run: Trained, lane: Lane, policy: Policy | None, seed: int, deterministic: bool) -> Actor:
    """Who acts for `lane`'s agents: its policy, or a random player. The run's one policy acts for
    every row as the env gives them (Player's direct path: no cut, no copy)."""
    rows, own = (ALL_ROWS, None) if lane.spans_run else (list(lane.rows), lane.own_obs)
    if policy is None:
        return RandomPlayer(lane.graph.observation_space, run.graph.action_space, seed, rows=rows, own=own)
    return Player(policy, name=lane.name, rows=rows, own=own, deterministic=deterministic)


def _stats(prefix: str, returns: list[float], game: bool = False) -> dict[str, Any]:
    """Mean and spread of a lane's returns, the returns, and (`game`: lanes playing each other) the
    games it won, drew and lost (return > 0, 0, < 0: a two-player game's result)."""
    stats = {f"{prefix}return_mean": float(np.mean(returns)), f"{prefix}return_std": float(np.std(returns)),
             f"{prefix}returns": returns}
    if game:
        r = np.asarray(returns)
        stats["won_drawn_lost"] = [int(np.sum(r > 0)), int(np.sum(r == 0)), int(np.sum(r < 0))]
    return stats


def make_env(name: str, kwargs: dict[str, Any], wrappers: list[EnvWrapper]):
    """One env of the run, as its actors made them."""
    try:
        return make_vector_env(name, kwargs, num_envs=1, env_index_offset=0, wrappers=wrappers)
    except TypeError as e:  # an env class without metadata that does not take render_mode
        if "render_mode" not in kwargs or "render_mode" not in str(e):
            raise
        raise no_frames(name, "its constructor takes no render_mode") from None
