"""Evaluator worker kernel: deterministic episodes with the newest parameters, apart from training.

Training returns mix exploration noise and several parameter versions; the evaluator answers
"how good is the current policy": every `interval_s` it loads the newest version and plays
`episodes` whole episodes on its own envs with the most likely actions, then reports their
returns (the controller shows their mean as `eval/episode_return_mean`). A round uses one
version throughout. Between rounds it idles on the parameter stream, so on a small machine it
costs the training workers little; each poll plays at most `steps_per_poll` steps so the inline
launcher's other kernels keep their turn. A round is a `srl.evaluation.Match`, the loop `srl eval`
plays.

With several policies (srl.graph.lanes) each acts for its own agents' rows of the one env, each with the
newest version of its own parameters (one that does not train, with the weights it acts with),
and each policy's mean return per agent is reported beside the mean over every agent
(`<policy>/eval/episode_return_mean`).
"""

from __future__ import annotations

import time

import numpy as np

from srl.api.env import VectorEnv
from srl.evaluation import Match, Player
from srl.monitor.timing import TimeBreakdown
from srl.spaces import Obs
from srl.streams.reports import EvalReport, Key
from srl.streams.transport import Receiver
from srl.workers.kernel import KernelDefaults

__all__ = ["EvaluatorKernel", "Player"]


class EvaluatorKernel(KernelDefaults):
    def __init__(
        self,
        players: list[Player],
        env: VectorEnv,
        seed: int,
        episodes: int,
        interval_s: float,
        steps_per_poll: int = 64,
    ) -> None:
        self.players, self.env = players, env
        self.seed, self.episodes, self.interval_s = seed, episodes, interval_s
        self.steps_per_poll = steps_per_poll
        self.clock = TimeBreakdown()  # labels nothing itself: the loop charges waiting and other
        self.obs: Obs | None = None
        self.match: Match | None = None  # the round being played (srl.evaluation.play); None: between rounds
        self.round_versions: list[int] = []
        self.next_round_s = 0.0  # the first round starts as soon as parameters arrive
        self._reset_report()

    def _reset_report(self) -> None:
        self.returns: list[np.ndarray] = []  # episodes of rounds finished since the last report
        self.versions = [-1] * len(self.players)  # the versions those episodes were played with
        self.eval_time_s = 0.0

    @property
    def round_returns(self) -> list[np.ndarray] | None:
        """Each episode's return per row of the round being played; None between rounds."""
        return None if self.match is None else [e.returns for e in self.match.finished]

    @property
    def receivers(self) -> list[Receiver]:
        return [r for player in self.players for r in player.params.receivers]

    def start(self) -> None:
        self.obs = self.env.reset(seed=self.seed)

    def poll(self) -> bool:
        if self.match is None:
            for player in self.players:  # drain the streams while idle; load the newest
                player.params.poll(player.policy)
            versions = [player.params.version for player in self.players]
            if min(versions) < 0 or time.monotonic() < self.next_round_s:
                return False
            # a round starts where the last ended: on a fresh episode of the env
            self.match, self.round_versions = Match(self.env, self.players, self.episodes, obs=self.obs), versions
        started = time.perf_counter()
        for _ in range(self.steps_per_poll):
            if self.match.step():
                self._end_round(self.match)
                break
        self.eval_time_s += time.perf_counter() - started
        return True

    def _end_round(self, match: Match) -> None:
        self.obs = match.obs
        self.returns, self.versions = [e.returns for e in match.finished], self.round_versions
        self.match = None
        self.next_round_s = time.monotonic() + self.interval_s
    def report(self) -> EvalReport:
        """The mean over every agent of each episode's return (as `srl eval` reports one env's), and
        with several policies each one's over its own agents."""
        out: EvalReport = {Key.EVAL_EPISODE_RETURNS: [float(r.mean()) for r in self.returns],
               Key.EVAL_POLICY_VERSION: min(self.versions), Key.EVAL_TIME_S: round(self.eval_time_s, 4)}
        if len(self.players) > 1:
            out[Key.EVAL_POLICIES] = {
                player.name: {Key.EPISODE_RETURNS: [float(r[player.rows].mean()) for r in self.returns],
                              Key.POLICY_VERSION: version}
                for player, version in zip(self.players, self.versions)}  # fmt: skip
        self._reset_report()
        return out

    def close(self) -> None:
        self.env.close()
