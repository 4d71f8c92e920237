"""Actor worker kernel: steps a ring of environment groups and records trajectory segments.

The ring is split into groups (`ring_splits`); each group has its own inference slot, so while
some groups wait for actions the others step. For one group the cycle is::

    reply (actions for obs t) -> record row t -> step envs -> write obs t+1 -> request -> ...

Row T of a full segment is also row 0 of the next one (the bootstrap observation), so a
segment is sent as soon as row T is recorded and the next one starts from the same slot data.

Each step's rewards and observations are checked for NaN / inf before they are recorded
(srl.workers.nonfinite): the run ends, or the step is mended and that env restarted (and the run
ends once skips are more than dataflow.max_skipped_fraction of the actor's last 100 episodes).
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from srl.api.env import VectorEnv
from srl.data import columns as C
from srl.monitor.episodes import EpisodeTally, episodes_report
from srl.monitor.info import add_values, ended_values
from srl.monitor.timing import ENV_STEP, SEND_RECV, TimeBreakdown
from srl.spaces import Obs, assign, obs_of
from srl.streams.inference import Slot
from srl.streams.reports import ActorReport, Key, SinkReport
from srl.streams.transport import Receiver
from srl.workers.kernel import KernelDefaults
from srl.workers.nonfinite import EnvGuard


class InferencePort(Protocol):
    receivers: list[Receiver]

    def request(self, split: int, min_version: int = 0, key: int = 0) -> None: ...

    def ready(self) -> list[int]: ...


class SampleSink(Protocol):
    """Where an actor's segments go: a SampleProducer, or one per policy (srl.workers.lanes)."""

    slots: dict[tuple[int, int], dict[str, np.ndarray]]

    @property
    def receivers(self) -> list[Receiver]: ...

    def acquire(self, split: int) -> int | None: ...

    def send(self, split: int, slot: int) -> None: ...

    def collect_releases(self) -> None: ...

    def report(self) -> SinkReport: ...


class ActorKernel(KernelDefaults):
    def __init__(
        self,
        envs: list[VectorEnv],
        inference: InferencePort,
        samples: SampleSink,
        infer_slots: list[Slot],
        sample_length: int,
        seeds: list[int],
        lock_step: bool = False,
        clock: TimeBreakdown | None = None,
        guards: list[EnvGuard] | None = None,
        info_keys: tuple[str, ...] = (),
    ) -> None:
        self.clock = clock or TimeBreakdown()  # shared with inline inference's `Acting`
        self.envs = envs
        self.inference = inference
        self.samples = samples
        self.infer_slots = infer_slots
        self.T = sample_length
        self.seeds = seeds  # reset seed of each group (env i of the group gets seed + i)
        # lock_step (deterministic mode): segment n is acted by parameter version v0 + n exactly (v0: the
        # first version its inference acted with, srl.workers.policy.Acting)
        self.lock_step = lock_step
        self.segments_sent = [0] * len(envs)
        self.requests_made = [0] * len(envs)
        self.slot_columns = [k for k in infer_slots[0] if k != "version"]
        # per group: its slot's "obs" array, or a dict of one array per leaf (srl.spaces); the
        # slots' arrays never change, so this is looked up once
        self.obs = [obs_of(slot) for slot in infer_slots]
        splits = len(envs)
        self.t = [0] * splits  # next row to record, per group
        self.current: list[int | None] = [None] * splits  # segment slot being filled, per group
        self.blocked: set[int] = set()  # groups waiting for the trainer to free a segment slot
        self.tallies = [EpisodeTally(e.num_rows, len(e.agents)) for e in envs]  # running returns, per group
        self.finished_returns: list[float] = []
        self.finished_lengths: list[int] = []
        self.env_steps = 0  # env steps since the last report
        self.env_time_s = 0.0
        self.guards = guards  # per group: NaN / inf checks of each step (srl.workers.nonfinite)
        self.nonfinite_episodes = 0  # episodes dropped for a non-finite value, since the last report
        # skip_episode: the actor's one tally of skips, shared by its groups' guards (srl.workers.nonfinite)
        self.skips = guards[0].skips if guards else None
        # monitor.info_keys: each key's values at the ends of the episodes counted, reported as the
        # returns are (srl.monitor.info)
        self.info_keys = info_keys
        for env in envs:
            env.watch_info(info_keys)
        self.finished_info: dict[str, list[float]] = {}

    @property
    def receivers(self) -> list[Receiver]:
        return self.inference.receivers + self.samples.receivers

    def start(self) -> None:
        for s, env in enumerate(self.envs):
            assign(self.obs[s], env.reset(seed=self.seeds[s]))
            if C.FIRST in self.infer_slots[s]:  # recurrent policies start every state afresh
                self.infer_slots[s][C.FIRST][:] = True
            if not self._next_segment(s):
                raise RuntimeError("no free segment slot at start")
            self._request(s)

    def poll(self) -> bool:
        did = False
        previous = self.clock.switch(SEND_RECV)
        self.samples.collect_releases()  # never leave one on the socket we wait on (see there)
        if self.blocked:
            self.clock.switch(previous)
            for s in list(self.blocked):
                if self._next_segment(s):
                    self._step(s)
                    did = True
            self.clock.switch(SEND_RECV)
        ready = self.inference.ready()  # inline inference switches to INFERENCE inside
        self.clock.switch(previous)
        for s in ready:
            self._on_action(s)
            did = True
        return did

    def _segment(self, s: int) -> dict[str, np.ndarray]:
        return self.samples.slots[(s, self.current[s])]  # type: ignore[index]  # held while recording

    def _record(self, s: int) -> None:
        """Copy obs, action, policy outputs and version of group s into row t of its segment."""
        segment, slot, t = self._segment(s), self.infer_slots[s], self.t[s]
        for name in self.slot_columns:
            segment[name][t] = slot[name]
        segment[C.POLICY_VERSION][t] = slot["version"][0]

    def _on_action(self, s: int) -> None:
        self._record(s)
        if self.t[s] == self.T:
            previous = self.clock.switch(SEND_RECV)
            self.samples.send(s, self.current[s])  # type: ignore[arg-type]  # held while recording
            self.clock.switch(previous)
            self.segments_sent[s] += 1
            self.current[s] = None
            if not self._next_segment(s):
                return
        self._step(s)

    def _next_segment(self, s: int) -> bool:
        previous = self.clock.switch(SEND_RECV)
        slot = self.samples.acquire(s)
        self.clock.switch(previous)
        if slot is None:
            self.blocked.add(s)
            return False
        self.blocked.discard(s)
        first = self.current[s] is None and self.t[s] == self.T
        self.current[s], self.t[s] = slot, 0
        if first:  # row 0 of the new segment = the bootstrap row T just sent
            self._record(s)
        return True

    def _step(self, s: int) -> None:
        env, slot, t = self.envs[s], self.infer_slots[s], self.t[s]
        started = time.perf_counter()
        previous = self.clock.switch(ENV_STEP)
        out = env.step(slot[C.ACTION])
        self.clock.switch(previous)
        self.env_time_s += time.perf_counter() - started
        segment = self._segment(s)
        reward, terminated, truncated = segment[C.REWARD][t], segment[C.TERMINATED][t], segment[C.TRUNCATED][t]
        reward[:] = out.reward
        terminated[:] = out.terminated
        truncated[:] = out.truncated
        obs = self.obs[s]
        assign(obs, out.obs)
        skipped_before = self.nonfinite_episodes
        dropped = self._mend_nonfinite(s, env, reward, terminated, truncated, obs)
        done = terminated | truncated
        finished = self._count_episodes(s, reward, done, dropped)
        if self.skips is not None and (dropped is not None or self.skips.watching):  # RunHalted past its limit
            self.skips.step(self.nonfinite_episodes - skipped_before, finished)
        if C.FIRST in slot:  # an ended episode's env has reset: its next obs starts one
            slot[C.FIRST][:] = done
        self.t[s] = t + 1
        self.env_steps += env.num_envs
        self._request(s)

    def _request(self, s: int) -> None:
        min_version = self.segments_sent[s] if self.lock_step else 0
        previous = self.clock.switch(SEND_RECV)
        self.inference.request(s, min_version, self.requests_made[s])
        self.clock.switch(previous)
        self.requests_made[s] += 1

    def _mend_nonfinite(
        self, s: int, env: VectorEnv, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
        obs: Obs,
    ) -> np.ndarray | None:
        """None when the step is finite (checked once over the group's arrays); else the step
        as recorded made finite, its bad envs restarted, and the rows whose episode is dropped
        (srl.workers.nonfinite). Raises RunHalted with dataflow.nonfinite_env=error."""
        if self.guards is None:
            return None
        rows = self.guards[s].bad_rows(obs, reward)
        if rows is None:
            return None
        dropped = self.guards[s].mend(env, rows, reward, terminated, truncated, obs)
        self.nonfinite_episodes += int(rows.sum())
        return dropped

    def _count_episodes(
        self, s: int, reward: np.ndarray, done: np.ndarray, dropped: np.ndarray | None = None
    ) -> int:
        """One episode per agent once all agents of its env are done (srl.monitor.episodes);
        a dropped episode's return is not one of them. Returns how many finished."""
        counted = done if dropped is None else done & ~dropped
        returns, lengths = self.tallies[s].step(reward, counted)
        if dropped is not None:
            self.tallies[s].drop(dropped)
        self.finished_returns += returns
        self.finished_lengths += lengths
        if returns and self.info_keys:
            self._keep_info(s, counted)
        return len(returns)

    def _keep_info(self, s: int, counted: np.ndarray) -> None:
        """The watched info values of the episodes group s just counted (srl.monitor.info)."""
        rows = self.tallies[s].ended(counted).nonzero()[0]
        add_values(self.finished_info, ended_values(self.envs[s].ended_info, rows))

    def report(self) -> ActorReport:
        out: ActorReport = {
            Key.ENV_STEPS: self.env_steps,
            **episodes_report(self.finished_returns, self.finished_lengths),
            Key.ENV_TIME_S: round(self.env_time_s, 4),
            Key.NONFINITE_EPISODES_SKIPPED: self.nonfinite_episodes,
            **self.samples.report(),  # segments_lost: sent to a trainer that died holding them
        }
        if self.info_keys:
            out[Key.EPISODE_INFO], self.finished_info = self.finished_info, {}
        if self.lock_step:  # each group waits for version v0 + its segments sent (a stalled run's message)
            out[Key.LOCK_STEP_SEGMENTS_SENT] = min(self.segments_sent)
        self.env_steps, self.finished_returns, self.finished_lengths, self.env_time_s = 0, [], [], 0.0
        self.nonfinite_episodes = 0
        return out

    def close(self) -> None:
        for env in self.envs:
            env.close()
