"""`srl eval` as a library: what scripts and tests import (srl.evaluation holds the code).

`evaluate` is the one evaluation, of a run of one policy or several. `evaluate_run`,
`evaluate_against` and `evaluate_policies` are its older names, kept for the scripts that call
them: each is `evaluate` with its arguments in the order it took them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from srl.evaluation.command import evaluate
from srl.evaluation.opponents import HEURISTICS, scripted_player
from srl.evaluation.run import score_against
from srl.evaluation.trained import saved_config

__all__ = ["HEURISTICS", "evaluate", "evaluate_against", "evaluate_policies", "evaluate_run", "saved_config",
           "score_against", "scripted_player"]


def evaluate_run(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True,
                 video: str | Path | None = None) -> dict[str, Any]:
    return evaluate(run_dir, episodes, seed, deterministic, video=video)


def evaluate_against(run_dir: str | Path, against: str, games: int, seed: int, episodes: int = 10,
                     deterministic: bool = True) -> dict[str, Any]:
    return evaluate(run_dir, episodes, seed, deterministic, against=against, games=games)


def evaluate_policies(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True,
                      against: str | None = None, snapshot: str | None = None) -> dict[str, Any]:
    return evaluate(run_dir, episodes, seed, deterministic, against=against, snapshot=snapshot)
