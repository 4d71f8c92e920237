"""`srl eval RUN_DIR [--against WHO] [--snapshot NAME] [--video FILE]`: one evaluation for a run of
one policy or several, lane by lane (srl.evaluation.trained, srl.evaluation.run).

What it prints names each lane's figures as a run's summary does: a run of one policy (one lane
named "") has them at the top level with its `policy_version`; a run of several has them under
`policies.<name>`, with `policy_versions`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from srl.config import ConfigError
from srl.evaluation.run import each_against, matches, together
from srl.evaluation.trained import Trained, load
from srl.monitor.video import check_video_path


def evaluate(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True, against: str | None = None,
             games: int = 200, snapshot: str | None = None, video: str | Path | None = None) -> dict[str, Any]:
    """What `srl eval` prints. Without `against`: every policy acting together for `episodes`.
    With it: each policy against `against` in the other policies' seats, beside a random player in
    its place (srl.evaluation.run.each_against); one policy of a turn-based game plays `games`
    matches against it, seats alternating. `snapshot`: a self-play league's learner acts with that
    snapshot's weights (best, or a name in league.json) instead of its newest."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    if video is not None:
        if against is not None:
            raise ConfigError("--video records the run's policies playing together: give it without --against")
        check_video_path(Path(video))
    run = load(Path(run_dir))
    if snapshot is not None:
        run.take_snapshot(snapshot)
    if against is None:
        lanes, recorded = together(run, episodes, seed, deterministic, None if video is None else Path(video))
        return _report(run, lanes, {"episodes": episodes}, recorded)
    if run.takes_every_seat:
        return _report(run, {"": matches(run, against, games, seed)}, {"against": against, "games": games})
    return _report(run, each_against(run, against, episodes, seed, deterministic),
                   {"episodes": episodes, "against": against})


def _report(run: Trained, lanes: dict[str, dict[str, Any]], head: dict[str, Any],
            tail: dict[str, Any] | None = None) -> dict[str, Any]:
    """The figures of the run's lanes, named as its summary names them."""
    if run.one:
        return {"run_dir": str(run.run_dir), "policy_version": run.versions[""], **head, **lanes[""], **(tail or {})}
    snapshot = {} if run.snapshot is None else {"snapshot": run.snapshot}
    return {"run_dir": str(run.run_dir), "policy_versions": run.versions, **snapshot, **head, "policies": lanes,
            **(tail or {})}
