"""Evaluator worker kernel: deterministic episodes with the newest parameters, apart from training.

Training returns mix exploration noise and several parameter versions; the evaluator answers
"how good is the current policy": every `interval_s` it loads the newest version and plays
`episodes` whole episodes on its own envs with the most likely actions, then reports their
returns (the controller shows their mean as `eval/episode_return_mean`). A round uses one
version throughout. Between rounds it idles on the parameter stream, so on a small machine it
costs the training workers little; each poll plays at most `steps_per_poll` steps so the inline
launcher's other kernels keep their turn.
"""

from __future__ import annotations

import time

import torch

from srl import devices
from srl.api.env import VectorEnv
from srl.api.policy import Policy
from srl.monitor.timing import TimeBreakdown
from srl.spaces import Obs, map_obs
from srl.streams.params import ParamSubscriber
from srl.streams.transport import Receiver


class EvaluatorKernel:
    def __init__(
        self,
        policy: Policy,
        params: ParamSubscriber,
        env: VectorEnv,
        seed: int,
        episodes: int,
        interval_s: float,
        steps_per_poll: int = 64,
    ) -> None:
        self.policy, self.params, self.env = policy.eval(), params, env
        self.device = devices.of(policy)  # where each step's observations go
        self.seed, self.episodes, self.interval_s = seed, episodes, interval_s
        self.steps_per_poll = steps_per_poll
        self.clock = TimeBreakdown()  # labels nothing itself: the loop charges waiting and other
        self.obs: Obs | None = None
        self.round_returns: list[float] | None = None  # None: between rounds
        self.round_version = -1
        self.running = 0.0
        self.next_round_s = 0.0  # the first round starts as soon as parameters arrive
        self._reset_report()

    def _reset_report(self) -> None:
        self.returns: list[float] = []  # episodes of rounds finished since the last report
        self.version = -1  # the version those episodes were played with
        self.eval_time_s = 0.0

    @property
    def receivers(self) -> list[Receiver]:
        return self.params.receivers

    def start(self) -> None:
        self.obs = self.env.reset(seed=self.seed)

    def poll(self) -> bool:
        if self.round_returns is None:
            self.params.poll(self.policy)  # drain the stream while idle; load the newest
            if self.params.version < 0 or time.monotonic() < self.next_round_s:
                return False
            self.round_returns, self.round_version, self.running = [], self.params.version, 0.0
        started = time.perf_counter()
        for _ in range(self.steps_per_poll):
            if self._step():
                break
        self.eval_time_s += time.perf_counter() - started
        return True

    def _step(self) -> bool:
        """One env step; True when the round is complete."""
        assert self.round_returns is not None and self.obs is not None
        with torch.inference_mode():
            obs = map_obs(lambda a: torch.from_numpy(a).to(self.device), self.obs)  # one tensor, or one per leaf
            action = self.policy.rollout(obs, deterministic=True)["action"].cpu().numpy()
        step = self.env.step(action)
        self.obs = step.obs
        self.policy.episodes_ended(step.terminated | step.truncated)  # a recurrent policy starts those rows over
        self.running += float(step.reward.mean())  # one env: its agents' mean, as `srl eval` reports
        if not (step.terminated | step.truncated).any():
            return False
        self.round_returns.append(self.running)
        self.running = 0.0
        if len(self.round_returns) < self.episodes:
            return False
        self.returns, self.version = self.round_returns, self.round_version
        self.round_returns = None
        self.next_round_s = time.monotonic() + self.interval_s
        return True

    def report(self) -> dict:
        out = {"eval_episode_returns": self.returns, "eval_policy_version": self.version,
               "eval_time_s": round(self.eval_time_s, 4)}
        self._reset_report()
        return out

    def finish(self) -> dict:
        return self.report()  # nothing kept past the run: the last report is a report

    def close(self) -> None:
        self.env.close()
