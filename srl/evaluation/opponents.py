"""Who `--against WHO` names, resolved in one place for every `srl eval`: `random` (None: a
RandomPlayer plays, legal moves in a turn-based game), `heuristic` (the game's scripted player,
HEURISTICS), a registered scripted policy (random-legal, connect4-lookahead), a snapshot of the
run's self-play league (league.json: v120, or best, the highest rated) or a checkpoint file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from srl import checkpoint
from srl.api.policy import Policy
from srl.config import ConfigError

# the scripted player `--against heuristic` means, per turn-based game (env_kwargs.module)
HEURISTICS = {"pettingzoo.classic.connect_four_v3": "connect4-lookahead"}


def resolve_opponent(against: str, run_dir: Path, game: Any, observation_space: gym.Space, action_space: gym.Space,
                     seed: int, network: Callable[[], Policy], files: bool = True, hint: str = "") -> Policy | None:
    """The policy `against` names (None: random). `game`: env_kwargs.module (for `heuristic`);
    `network`: a new network of the run's policy, for the weights of a snapshot or a checkpoint;
    `files`: whether a checkpoint file is taken; `hint`: what else the caller takes, for the error."""
    if against == "random":
        return None
    player = scripted_player(against, game, observation_space, action_space, seed)
    if player is not None:
        return player
    snapshot = league_snapshot(run_dir, against)
    path = snapshot[1] if snapshot is not None else Path(against) if files else None
    if path is None or not path.is_file():
        from srl.models.scripted import scripted_names
        from srl.population.league import FILE

        raise ConfigError(f"--against {against!r}: not random, heuristic (the game's scripted player), a scripted "
                          f"policy ({', '.join(scripted_names())}), a snapshot in {run_dir / FILE} "
                          f"({', '.join(snapshot_names(run_dir)) or 'none'})" + (" or a checkpoint file" if files else "")
                          + hint)
    return load_network(network, path)


def scripted_player(against: str, game: Any, observation_space: gym.Space, action_space: gym.Space,
                    seed: int) -> Policy | None:
    """The scripted player `against` names: `heuristic` (the game's, HEURISTICS) or a registered
    scripted policy; None where it names neither."""
    from srl.api import registry
    from srl.models.scripted import is_scripted

    name = against
    if against == "heuristic":
        if game not in HEURISTICS:
            raise ConfigError(f"--against heuristic: no heuristic player for {game!r} (known: "
                              f"{', '.join(HEURISTICS)}); try random, a scripted policy or a snapshot")
        name = HEURISTICS[game]
    factory = registry.policies.get(name) if name in registry.policies else None
    if not is_scripted(factory):
        return None
    try:
        return factory(observation_space, action_space, seed=seed)
    except TypeError as e:  # a player of another game
        raise ConfigError(f"--against {against}: {e}") from None


def league_snapshot(run_dir: Path, name: str) -> tuple[str, Path] | None:
    """The name and checkpoint of snapshot `name` (or `best`, the highest rated) of the run's
    self-play league; None where the run has no league.json, or none of that name (a scripted member of
    the pool is played as a scripted player)."""
    from srl.population.league import FILE, League

    if not (run_dir / FILE).is_file():
        return None
    league = League.load(run_dir / FILE)
    snap = league.best() if name == "best" else league.snapshots.get(name)
    return None if snap is None or snap.scripted else (snap.name, run_dir / snap.checkpoint)


def snapshot_names(run_dir: Path) -> list[str]:
    from srl.population.league import FILE, League

    league = League.load(run_dir / FILE) if (run_dir / FILE).is_file() else None
    return [] if league is None else [n for n, s in league.snapshots.items() if not s.scripted]


def load_network(network: Callable[[], Policy], path: Path) -> Policy:
    """A new network with the weights of the checkpoint at `path`, for acting."""
    net = network()
    checkpoint.load_file(path, apply=lambda state: net.load_state_dict(state["policy"]))
    return net.eval()
