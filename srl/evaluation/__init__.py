"""Evaluation, in one place: who acts (`players`: a policy with its weights, a scripted player, a
random one), who `--against` names (`opponents`), the one loop they play in (`play`), and `srl
eval`: the run and its lanes' policies (`trained`: one policy is one lane), what it plays with them
(`run`) and what it prints (`command`). The in-run evaluator
(srl.workers.evaluator) and an ensemble member's evaluation (srl.workers.member) step the same loop.

Only the light modules are imported here: the worker kernels import this package, and `run`
reaches srl.graph, which builds those kernels.
"""

from srl.evaluation.play import Episode, Match, play
from srl.evaluation.players import Player, RandomPlayer

__all__ = ["Episode", "Match", "Player", "RandomPlayer", "play"]
