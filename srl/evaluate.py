"""`srl eval` as a library: what scripts and tests import (srl.evaluation holds the code)."""

from srl.evaluation.command import evaluate
from srl.evaluation.opponents import HEURISTICS, scripted_player
from srl.evaluation.policies import evaluate_policies
from srl.evaluation.run import evaluate_against, evaluate_run, saved_config, score_against

__all__ = ["HEURISTICS", "evaluate", "evaluate_against", "evaluate_policies", "evaluate_run", "saved_config",
           "score_against", "scripted_player"]
