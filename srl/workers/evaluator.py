"""Evaluator worker kernel: deterministic episodes with the newest parameters, apart from training.

Training returns mix exploration noise and several parameter versions; the evaluator answers
"how good is the current policy": every `interval_s` it loads the newest version and plays
`episodes` whole episodes on its own envs with the most likely actions, then reports their
returns (the controller shows their mean as `eval/episode_return_mean`). A round uses one
version throughout. Between rounds it idles on the parameter stream, so on a small machine it
costs the training workers little; each poll plays at most `steps_per_poll` steps so the inline
launcher's other kernels keep their turn.

With several policies (srl.lanes) each acts for its own agents' rows of the one env, each with the
newest version of its own parameters (one that does not train, with the weights it acts with),
and each policy's mean return per agent is reported beside the mean over every agent
(`<policy>/eval/episode_return_mean`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from srl import devices
from srl.api.env import VectorEnv
from srl.api.policy import Policy
from srl.monitor.timing import TimeBreakdown
from srl.spaces import Obs, map_obs
from srl.streams.params import FixedParams, ParamSubscriber
from srl.streams.transport import Receiver
from srl.workers.kernel import KernelDefaults


def _every_row(obs: Obs) -> Obs:
    return obs


@dataclass
class Player:
    """A policy and where its weights come from, acting for `rows` of the env (all of them in a
    one-policy run); `own` cuts its rows' observations out of the env's (srl.graph.Lane.own_obs)."""

    policy: Policy
    params: ParamSubscriber | FixedParams
    name: str = ""
    rows: list[int] | slice = field(default_factory=lambda: slice(None))
    own: Callable[[Obs], Obs] = _every_row

    def __post_init__(self) -> None:
        self.policy.eval()
        self.device = devices.of(self.policy)  # where its observations go

    def act(self, obs: Obs) -> np.ndarray:
        """Its most likely actions for its rows of the env's observation."""
        with torch.inference_mode():
            mine = map_obs(lambda a: torch.from_numpy(a).to(self.device), self.own(obs))  # one tensor, or one per leaf
            return self.policy.rollout(mine, deterministic=True)["action"].cpu().numpy()


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
        self.round_returns: list[np.ndarray] | None = None  # each episode's return per row; None: between rounds
        self.round_versions: list[int] = []
        self.running = np.zeros(env.num_rows)
        self.next_round_s = 0.0  # the first round starts as soon as parameters arrive
        self._reset_report()

    def _reset_report(self) -> None:
        self.returns: list[np.ndarray] = []  # episodes of rounds finished since the last report
        self.versions = [-1] * len(self.players)  # the versions those episodes were played with
        self.eval_time_s = 0.0

    @property
    def receivers(self) -> list[Receiver]:
        return [r for player in self.players for r in player.params.receivers]

    def start(self) -> None:
        self.obs = self.env.reset(seed=self.seed)

    def poll(self) -> bool:
        if self.round_returns is None:
            for player in self.players:  # drain the streams while idle; load the newest
                player.params.poll(player.policy)
            versions = [player.params.version for player in self.players]
            if min(versions) < 0 or time.monotonic() < self.next_round_s:
                return False
            self.round_returns, self.round_versions = [], versions
            self.running[:] = 0.0
        started = time.perf_counter()
        for _ in range(self.steps_per_poll):
            if self._step():
                break
        self.eval_time_s += time.perf_counter() - started
        return True

    def _step(self) -> bool:
        """One env step; True when the round is complete."""
        assert self.round_returns is not None and self.obs is not None
        actions = [player.act(self.obs) for player in self.players]
        action = np.zeros((self.env.num_rows, *actions[0].shape[1:]), actions[0].dtype)
        for player, mine in zip(self.players, actions):
            action[player.rows] = mine
        step = self.env.step(action)
        self.obs = step.obs
        ended = step.terminated | step.truncated
        for player in self.players:
            player.policy.episodes_ended(ended[player.rows])  # a recurrent policy starts those rows over
        self.running += step.reward
        if not ended.any():  # one env: its rows end together
            return False
        self.round_returns.append(self.running.copy())
        self.running[:] = 0.0
        if len(self.round_returns) < self.episodes:
            return False
        self.returns, self.versions = self.round_returns, self.round_versions
        self.round_returns = None
        self.next_round_s = time.monotonic() + self.interval_s
        return True

    def report(self) -> dict:
        """The mean over every agent of each episode's return (as `srl eval` reports one env's), and
        with several policies each one's over its own agents."""
        out = {"eval_episode_returns": [float(r.mean()) for r in self.returns],
               "eval_policy_version": min(self.versions), "eval_time_s": round(self.eval_time_s, 4)}
        if len(self.players) > 1:
            out["eval_policies"] = {
                player.name: {"episode_returns": [float(r[player.rows].mean()) for r in self.returns],
                              "policy_version": version}
                for player, version in zip(self.players, self.versions)}  # fmt: skip
        self._reset_report()
        return out

    def close(self) -> None:
        self.env.close()
