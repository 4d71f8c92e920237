"""`srl eval RUN_DIR [--against WHO] [--snapshot NAME]`: which evaluation a run gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from srl.evaluation.policies import evaluate_policies, is_multi_policy
from srl.evaluation.run import evaluate_against, evaluate_run


def evaluate(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True, against: str | None = None,
             games: int = 200, snapshot: str | None = None, video: str | Path | None = None) -> dict[str, Any]:
    """What `srl eval` prints, for a run of one policy or several (srl.graph.lanes)."""
    if is_multi_policy(run_dir):  # several policies: all at once, or each against random ones
        return evaluate_policies(run_dir, episodes, seed, deterministic, against=against, snapshot=snapshot)
    if against is None:
        return evaluate_run(run_dir, episodes, seed, deterministic, video=video)
    return evaluate_against(run_dir, against, games=games, seed=seed, episodes=episodes, deterministic=deterministic)
