"""Pod kernel: environment, policy and trainer in one process on one device, no traffic at all.

ElegantRL's "podracer" pods, for batched torch environments (`srl.envs.batched`): where the
dataflow separates actors, policy workers and the trainer (and moves samples between them), a
pod keeps everything on one device. One `poll()` is one iteration::

    for t in 0 .. T-1:                                  # under torch.inference_mode
        obs, reward, terminated, truncated = env.step(action[t])     # all envs, one call
        write reward/flags into row t, obs into row t + 1
        policy.rollout(obs) -> action, log_prob, value into row t + 1
    algorithm.step(buffers, env_steps); version += 1
    row T (the bootstrap row) is copied to row 0 of the next rollout

The buffers are preallocated on the env's device, shaped [T + 1, rows, ...] with the columns of
`srl.data.columns` (obs, action, reward, terminated, truncated, policy_version and the policy's
rollout fields, e.g. log_prob and value): exactly the segments the trainer of the dataflow
gathers, so any `Algorithm` runs unchanged. Row 0 was acted by the previous version (as a
segment's row 0 in the dataflow is), every other row by the current one.

Rollout outputs made under `torch.inference_mode` are inference tensors, which autograd
refuses to save; they are copied into the buffers (ordinary tensors) at once, so PPO's
`analyze` works on the stored observations and actions.

Finished episodes are tracked on the device (running return and length per row, then a ring of
the last 100 finished ones); nothing crosses to the host inside an iteration: a report reads the
ring, the counters and the last update's stats in one copy (see PodKernel). `report()` has the keys both an actor's and
the trainer's reports have (see `srl.launch.monitor.RunMonitor.on_report`); `finish()` adds
"params_sha256". `srl.testing.pod.train_pod(...)` drives a pod to a target return in-process.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from srl.api import registry
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import FieldSpec, Policy
from srl.data import columns as C
from srl.envs.batched import BatchedTorchEnv, make_batched_env
from srl.faults import RunHalted
from srl.graph import space_spec
from srl.monitor.episodes import WINDOW
from srl.monitor.timing import TimeBreakdown
from srl.streams.reports import Key, PodReport, with_stats
from srl.transfer import torch_dtype
from srl.workers.learner import Learner, LearnerSettings
from srl.workers.nonfinite import DeviceUpdateGuard
from srl.workers.stop import LockStepStop

CUDA_GRAPHS = ("auto", "on", "off")
WARMUP_ITERATIONS = 3  # eager iterations on a side stream before capture (torch wants a few)


class PodKernel(Learner[PodReport]):
    """Env, policy and algorithm on one device; see the module doc.

    `policy` must already live on `env.device` (build the algorithm after moving it, so the
    optimizer holds the device's parameters). `seed` seeds the env's first reset. Checkpoints and
    resuming are the trainers' (srl.workers.learner.Learner, by the same `settings`): with a
    `settings.run_dir`, checkpoints are written every `checkpoint_interval_s` and by `finish()`;
    `settings.resume` continues from the newest usable one there of run `run_id`. A rollout with a NaN or an infinity ends the run (a pod cannot restart one env
    of its batch): it is not trained on, and the next `poll()` after the report that finds it
    raises RunHalted; an update that leaves one is undone on the device
    (srl.workers.nonfinite.DeviceUpdateGuard).

    No host sync inside an iteration (issue 35): the episode window, the counters, the update's
    stats and the finiteness flags stay device tensors and are read in one copy (into pinned
    memory on CUDA) by `report()`, `sync()` and checkpoints. With a lock-step `stop`, each poll
    reads the previous iteration's small summary instead, after queueing its own: the stop acts
    one update late, at the same update in every run. `cuda_graphs` (auto: on where the device
    is CUDA) captures the rollout and the update as two CUDA graphs after WARMUP_ITERATIONS
    eager ones.
    """

    who = "pod"

    def __init__(
        self,
        env: BatchedTorchEnv,
        policy: Policy,
        algorithm: Algorithm,
        sample_length: int,
        seed: int = 0,
        settings: LearnerSettings | None = None,
        stop: LockStepStop | None = None,
        cuda_graphs: str = "auto",
    ) -> None:
        if sample_length < 1:
            raise ValueError(f"sample_length must be >= 1, got {sample_length}")
        if cuda_graphs not in CUDA_GRAPHS:
            raise ValueError(f"pod.cuda_graphs must be one of {', '.join(CUDA_GRAPHS)}, got {cuda_graphs!r}")
        self.env = env
        self.env_name = type(env).__name__  # make_pod names it as configured
        self.device = env.device
        devices = {p.device for p in policy.parameters()}
        if devices and devices != {self.device}:
            raise ValueError(
                f"the policy's parameters are on {sorted(map(str, devices))}, the env on {self.device}"
            )
        on_cuda = self.device.type == "cuda"
        if cuda_graphs == "on" and not on_cuda:
            raise ValueError(f"pod.cuda_graphs=on needs a CUDA device, the pod's is {self.device}")
        self.use_graphs = on_cuda and cuda_graphs != "off"
        blockers = _graph_blockers(policy, algorithm)
        if self.use_graphs and blockers:
            if cuda_graphs == "on":
                raise ValueError(f"pod.cuda_graphs=on: {blockers} reads values back to the host every update, "
                                 "which a CUDA graph cannot hold; use pod.cuda_graphs=auto or off")
            print(f"srl: the pod runs eagerly on {self.device}: {blockers} reads values back to the host every "
                  "update, which a CUDA graph cannot hold", file=sys.stderr, flush=True)
            self.use_graphs = False
        self.T = int(sample_length)
        self.seed = int(seed)
        self.rows = env.num_rows
        self.num_agents = env.num_agents
        self.stop = stop  # deterministic mode: the run's stop rules, decided here (srl.workers.stop)
        self.window = max(WINDOW, stop.window if stop is not None else 0)  # episodes kept on the device

        fields = {
            C.OBS: space_spec(env.observation_space),
            C.ACTION: space_spec(env.action_space),
            **policy.rollout_fields(),
        }
        self.outputs = [name for name in fields if name != C.OBS]  # what rollout writes
        fields |= {C.REWARD: FieldSpec((), np.float32), C.TERMINATED: FieldSpec((), np.bool_),
                   C.TRUNCATED: FieldSpec((), np.bool_), C.POLICY_VERSION: FieldSpec((), np.int64)}
        dev = self.device
        with torch.inference_mode(False):
            self.buffers: dict[str, torch.Tensor] = {
                name: torch.zeros(self.T + 1, self.rows, *spec.shape, dtype=torch_dtype(spec.dtype), device=dev)
                for name, spec in fields.items()
            }
            # episode accounting, on the device
            self._running_return = torch.zeros(self.rows, dtype=torch.float64, device=dev)
            self._running_length = torch.zeros(self.rows, dtype=torch.int64, device=dev)
            self._ended_return = torch.zeros(self.T, self.rows, dtype=torch.float64, device=dev)
            self._ended_length = torch.zeros(self.T, self.rows, dtype=torch.int64, device=dev)
            self._done = torch.zeros(self.T, self.rows, dtype=torch.bool, device=dev)
            # the last `window` finished episodes, a ring (slot `window` takes the writes of the others)
            self._ring_return = torch.zeros(self.window + 1, dtype=torch.float64, device=dev)
            self._ring_length = torch.zeros(self.window + 1, dtype=torch.int64, device=dev)
            self._ring_slots = torch.arange(self.window, dtype=torch.int64, device=dev)
            self._episodes_t = torch.zeros((), dtype=torch.int64, device=dev)  # every one finished
            # counters of kept updates (an undone one is no version), and the rollout's finiteness:
            # (bad, field 1 = reward / 2 = observation, flat index t * rows + row, version)
            self._version_t = torch.zeros((), dtype=torch.int64, device=dev)
            self._trained_t = torch.zeros((), dtype=torch.int64, device=dev)
            self._rollout_ok = torch.ones((), dtype=torch.bool, device=dev)
            self._bad_rollout = torch.zeros(4, dtype=torch.int64, device=dev)
            self._stats_t: torch.Tensor | None = None  # the last kept update's stats, in _stat_names order
            self._control_t = torch.zeros(4, dtype=torch.float64, device=dev)  # the stop's summary

        # version and trained_env_steps: host copies of the device counters, as of the last read
        super().__init__(policy, algorithm, settings or LearnerSettings())  # resumes where settings say
        self._version_t.fill_(self.version)
        self._trained_t.fill_(self.trained_env_steps)
        self.guard = DeviceUpdateGuard(policy, algorithm, self.settings.max_nonfinite_updates, dev)
        set_rate = getattr(algorithm, "_set_learning_rate", None)
        if set_rate is not None and hasattr(algorithm, "device_step"):
            set_rate(self._trained_t)  # the rate a device tensor from the start: the guard's state keeps its layout
        self._stat_names: list[str] = []
        self.stats: dict[str, float] = {}  # the latest kept update's (kept across reports)
        self.lag_mean: float | None = None
        self.finished_returns: list[float] = []  # episodes read since the last report
        self.finished_lengths: list[int] = []
        self._episodes_read = 0  # the device's count at the last read
        self._episodes_since_report = 0
        self._version_at_report = self.version
        self._skipped_read = 0
        self.nonfinite_skipped = 0  # updates undone since the last report
        self._streak_said = False
        self._halt: str | None = None  # found by a read; the next poll raises it
        self._iterations = 0  # polls that ran an iteration
        self._pending: tuple[torch.Tensor, Any] | None = None  # the stop's summary in flight
        self._pinned: dict[int, torch.Tensor] = {}
        self._graphs: tuple[Any, Any] | None = None
        self._side_stream: Any = None
        self._reset_stats()
        self.started = False
        self.receivers: list = []  # nothing to wait on: a pod only computes
        self.clock = TimeBreakdown()  # its env/infer/train times are in its reports; the loop labels waiting

    # -- counters ---------------------------------------------------------------------------------

    def _reset_stats(self) -> None:
        self.env_steps = 0  # since the last report
        self.finished_returns, self.finished_lengths = [], []
        self._episodes_since_report = 0
        self.env_time_s = self.infer_time_s = self.train_time_s = 0.0

    # -- kernel -----------------------------------------------------------------------------------

    def start(self) -> None:
        buf = self.buffers
        with torch.inference_mode():
            buf[C.OBS][0].copy_(self.env.reset(seed=self.seed))
            self._act(0)
        self.started = True

    def poll(self) -> bool:
        """One rollout of T steps over every env, then one update; nothing once `stop` says the run is over."""
        if not self.started:
            self.start()
        if self._halt is not None:
            raise RunHalted(self._halt)
        if self.stop is not None and self.stop.reason is not None:
            return False  # done: the last update's parameters are final
        if self._graphs is not None:
            self._replay()
        elif self.use_graphs:
            self._warm_up_or_capture()
        else:
            self._iterate()
        self._iterations += 1
        self.env_steps += self.T * self.env.num_envs
        # lag of the trained rows 0..T-1: row 0 was acted by the previous version (none before
        # the first update), rows 1..T-1 by this one
        self.lag_mean = (1.0 if self._iterations > 1 or self.version > 0 else 0.0) / self.T
        if self.stop is not None:
            self._stop_one_late()
        self._checkpoint_if_due()
        return True

    def _iterate(self) -> None:
        self._rollout()
        started = time.perf_counter()
        self._update()
        self.train_time_s += time.perf_counter() - started

    # -- CUDA graphs ------------------------------------------------------------------------------

    def _warm_up_or_capture(self) -> None:
        """The first WARMUP_ITERATIONS iterations run eagerly on a side stream (as torch.cuda.graph
        wants: lazy inits, cuBLAS workspaces, autograd's streams); the next one captures the
        rollout and the update and replays them (capture itself runs nothing)."""
        if self._iterations < WARMUP_ITERATIONS:
            if self._side_stream is None:
                self._side_stream = torch.cuda.Stream(self.device)
            side = self._side_stream
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self._iterate()
            torch.cuda.current_stream(self.device).wait_stream(side)
            return
        rollout, update = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        rollout.register_generator_state(self.env.generator)  # the env's own; the default one is registered
        torch.cuda.synchronize(self.device)
        with torch.cuda.graph(rollout):
            self._rollout()
        with torch.cuda.graph(update, pool=rollout.pool()):
            self._update()
        self._graphs = (rollout, update)
        self._replay()

    def _replay(self) -> None:
        assert self._graphs is not None
        rollout, update = self._graphs
        started = time.perf_counter()
        rollout.replay()
        rolled = time.perf_counter()
        update.replay()
        self.env_time_s += rolled - started  # (the host's launch time: the device runs on)
        self.train_time_s += time.perf_counter() - rolled

    # -- one iteration, device work only ----------------------------------------------------------

    def _act(self, t: int) -> None:
        """policy.rollout on row t's obs; outputs (inference tensors) copied into row t."""
        started = time.perf_counter()
        buf = self.buffers
        out = self.policy.rollout(buf[C.OBS][t])
        for name in self.outputs:
            buf[name][t].copy_(out[name].reshape(buf[name][t].shape))
        buf[C.POLICY_VERSION][t].copy_(self._version_t)
        self.infer_time_s += time.perf_counter() - started

    def _rollout(self) -> None:
        """T steps of every env, the finished episodes into the device window, the finiteness flag."""
        buf, env = self.buffers, self.env
        obs_buf, action, reward = buf[C.OBS], buf[C.ACTION], buf[C.REWARD]
        terminated, truncated = buf[C.TERMINATED], buf[C.TRUNCATED]
        ret, length, done = self._running_return, self._running_length, self._done
        env_time = 0.0
        with torch.inference_mode():
            for t in range(self.T):
                started = time.perf_counter()
                obs, r, term, trunc = env.step(action[t])
                env_time += time.perf_counter() - started
                reward[t].copy_(r)
                terminated[t].copy_(term)
                truncated[t].copy_(trunc)
                obs_buf[t + 1].copy_(obs)
                # episode accounting: the return and length of the rows that just ended
                torch.logical_or(term, trunc, out=done[t])
                ret.add_(r)
                length.add_(1)
                self._ended_return[t].copy_(ret)
                self._ended_length[t].copy_(length)
                ret.masked_fill_(done[t], 0.0)
                length.masked_fill_(done[t], 0)
                self._act(t + 1)
            self._keep_episodes()
            self._check_finite()
        self.env_time_s += env_time

    def _keep_episodes(self) -> None:
        """The rollout's finished episodes, in (step, row) order, into the ring of the last
        `window`: positions from a cumulative count, no boolean indexing, no host read."""
        window = self.window
        done = self._done.flatten()
        rank = done.cumsum(0)  # 1-based among this rollout's finished episodes
        new = rank[-1]
        keep = done & (rank > new - window)  # only the last `window` can stay (unique slots)
        slot = torch.where(keep, (self._episodes_t + rank - 1) % window, window)
        self._ring_return.index_put_((slot,), self._ended_return.flatten())
        self._ring_length.index_put_((slot,), self._ended_length.flatten())
        self._episodes_t.add_(new)

    def _check_finite(self) -> None:
        """The rollout's rewards and observations: where the first non-finite one is, kept on the
        device (the first such rollout's), and a flag that keeps the update from training on it."""
        reward, obs = self.buffers[C.REWARD][: self.T], self.buffers[C.OBS][1:]
        bad_reward = ~torch.isfinite(reward)
        bad = bad_reward
        if obs.is_floating_point():
            bad = bad | ~torch.isfinite(obs.reshape(self.T, self.rows, -1)).all(-1)
        flat = bad.flatten()
        first = flat.long().argmax()
        field = torch.where(bad_reward.flatten().gather(0, first.view(1)).squeeze(0), 1, 2)  # (x[t] of a 0-dim t reads t)
        found = flat.any()
        self._rollout_ok.copy_(~found)
        where = torch.stack([torch.ones_like(first), field, first, self._version_t])
        self._bad_rollout.copy_(torch.where(found & (self._bad_rollout[0] == 0), where, self._bad_rollout))

    def _update(self) -> None:
        steps = self.T * self.env.num_envs
        stats = self.guard.step(self.buffers, self._trained_t + steps, self._rollout_ok)
        ok = self.guard.ok
        with torch.inference_mode(False), torch.no_grad():
            if not self._stat_names:  # the first update (eager): the stats' names and buffer
                self._stat_names = list(stats)
                self._stats_t = torch.full((len(stats),), float("nan"), dtype=torch.float64, device=self.device)
            assert self._stats_t is not None
            values = torch.stack([stats[name].to(torch.float64).reshape(()) for name in self._stat_names])
            self._stats_t.copy_(torch.where(ok, values, self._stats_t))
            self._version_t.add_(ok.long())
            self._trained_t.add_(ok.long() * steps)
            for tensor in self.buffers.values():  # the bootstrap row becomes row 0
                tensor[0].copy_(tensor[self.T])
            if self.stop is not None:
                summary = [self._version_t, self._trained_t, self._episodes_t, self._window_mean(self.stop.window)]
                self._control_t.copy_(torch.stack([x.to(torch.float64) for x in summary]))

    def _window_mean(self, size: int) -> torch.Tensor:
        """Mean return of the last `size` finished episodes (of the ring; meaningful once there are `size`)."""
        age = (self._episodes_t - 1 - self._ring_slots) % self.window  # 0 = the newest
        return torch.where(age < size, self._ring_return[: self.window], 0.0).sum() / size

    # -- reading the device -----------------------------------------------------------------------

    def _to_host(self, parts: list[torch.Tensor]) -> np.ndarray:
        """The parts (float64) in one copy; on CUDA through a pinned buffer, waited on once."""
        packed = torch.cat([p.reshape(-1).to(torch.float64) for p in parts])
        if self.device.type != "cuda":
            return packed.numpy().copy()
        host = self._pinned_buffer(packed.numel(), 0)
        host.copy_(packed, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return host.numpy().copy()

    def _pinned_buffer(self, n: int, key: int) -> torch.Tensor:
        buf = self._pinned.get(key)
        if buf is None or buf.numel() != n:
            buf = self._pinned[key] = torch.empty(n, dtype=torch.float64, pin_memory=True)
        return buf

    def _stop_one_late(self) -> None:
        """Queue a copy of this iteration's stop summary; decide on the previous one's (queued a
        poll ago: waiting for it leaves this iteration's work queued, so the device never idles)."""
        assert self.stop is not None
        previous = self._pending
        if self.device.type == "cuda":
            host = self._pinned_buffer(4, 1 + self._iterations % 2)
            host.copy_(self._control_t, non_blocking=True)
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
            self._pending = (host, event)
        else:
            self._pending = (self._control_t.clone(), None)
        if previous is None:
            return
        host, event = previous
        if event is not None:
            event.synchronize()
        version, trained, episodes, mean = (float(x) for x in host.numpy())
        self.stop.after_summary(int(version), int(trained), int(episodes), mean)

    def sync(self) -> None:
        """Read the device once: counters, the last kept update's stats, the episodes finished
        since the last read (the last `window` of them: all any report carries), the halts."""
        parts = [self._version_t, self._trained_t, self._episodes_t, self.guard.skipped_t, self.guard.in_a_row_t,
                 self.guard.first_bad_t, self._bad_rollout, self._ring_return[: self.window],
                 self._ring_length[: self.window]]
        if self._stats_t is not None:
            parts.append(self._stats_t)
        host = self._to_host(parts)
        version, trained, episodes, skipped, in_a_row, first_bad = (int(x) for x in host[:6])
        bad_rollout = [int(x) for x in host[6:10]]
        w = self.window
        ring_return, ring_length = host[10 : 10 + w], host[10 + w : 10 + 2 * w]
        self.version, self.trained_env_steps = version, trained
        if self._stats_t is not None and version > 0:
            self.stats = dict(zip(self._stat_names, host[10 + 2 * w :].tolist()))
            observe = getattr(self.algorithm, "observe_stats", None)
            if observe is not None:
                observe(self.stats)
        new = episodes - self._episodes_read
        self._episodes_read = episodes
        self._episodes_since_report += new
        slots = [(episodes - k) % w for k in range(min(new, w), 0, -1)]  # oldest first
        self.finished_returns += [float(ring_return[s]) for s in slots]
        self.finished_lengths += [int(ring_length[s]) for s in slots]
        self._guard_news(skipped, in_a_row, first_bad)
        if bad_rollout[0] and self._halt is None:
            t, row = divmod(bad_rollout[2], self.rows)
            field = "reward" if bad_rollout[1] == 1 else "observation"
            self._halt = (f"env {self.env_name!r} returned a non-finite {field} at env index {row // self.num_agents} "
                          f"(pod, rollout step {t} after version {bad_rollout[3]}): the run ends (a pod cannot "
                          "restart one env of its batch)")

    def _guard_news(self, skipped: int, in_a_row: int, first_bad: int) -> None:
        fresh = skipped - self._skipped_read
        self._skipped_read = skipped
        self.nonfinite_skipped += fresh
        what = self.guard.describe(first_bad)
        if in_a_row > self.guard.max_in_a_row and self._halt is None:
            self._halt = (f"{in_a_row} updates in a row made {what} non-finite (each one undone; "
                          f"launch.max_nonfinite_updates={self.guard.max_in_a_row}): the run ends, the last good "
                          "checkpoint is kept")
        if fresh and not self._streak_said and first_bad >= 0:  # one line per streak, not per update
            print(f"srl: update undone: it made {what} non-finite (counted in nonfinite_updates_skipped)",
                  file=sys.stderr, flush=True)
        self._streak_said = in_a_row > 0

    # -- reports ----------------------------------------------------------------------------------

    def report(self) -> PodReport:
        """Since the last report: env steps, finished episodes, updates, times; and the latest
        update's algorithm stats and policy lag (kept until the next update). The keys of an
        actor's report and of the trainer's report together. The one read of the device."""
        self.sync()
        out: PodReport = {
            Key.ENV_STEPS: self.env_steps,
            Key.EPISODES: self._episodes_since_report,
            Key.EPISODE_RETURNS: self.finished_returns[-WINDOW:],
            Key.EPISODE_LENGTHS: self.finished_lengths[-WINDOW:],
            Key.ENV_TIME_S: round(self.env_time_s, 4),
            Key.INFER_TIME_S: round(self.infer_time_s, 4),
            Key.TRAIN_TIME_S: round(self.train_time_s, 4),
            Key.POLICY_VERSION: self.version,
            Key.TRAINED_ENV_STEPS: self.trained_env_steps,
            Key.UPDATES: self.version - self._version_at_report,
            Key.SEGMENTS_DROPPED: 0,
            Key.POLICY_LAG_MEAN: self.lag_mean,
            Key.NONFINITE_UPDATES_SKIPPED: self.nonfinite_skipped,
        }
        self._version_at_report = self.version
        self.nonfinite_skipped = 0
        if self.stop is not None:
            out.update(self.stop.report())  # the stop and its kind (srl.workers.stop)
        out = with_stats(out, self.stats)
        self._reset_stats()
        return out

    def save_checkpoint(self) -> None:
        if self.run_dir is not None:
            self.sync()  # the counters (a read: once per checkpoint)
        super().save_checkpoint()

    def close(self) -> None:
        self.env.close()


def _graph_blockers(policy: Policy, algorithm: Algorithm) -> str:
    """What keeps a pod's update out of a CUDA graph ('' for nothing): each reads to the host."""
    if not hasattr(algorithm, "device_step"):
        return f"algorithm {type(algorithm).__name__} (no device_step)"
    if getattr(algorithm, "value_norm", None) is not None:
        return "algo.value_norm"
    if getattr(policy, "recurrent", False):
        return "a recurrent policy"
    return ""


# ------------------------------------------------------------------------------ driving a pod


def make_pod(
    env: str | BatchedTorchEnv = "batched-cartpole",
    num_envs: int = 512,
    sample_length: int = 16,
    algo: AlgorithmConfig | Mapping[str, Any] | None = None,
    algorithm: str = "ppo",
    policy: str = "actor-critic-mlp",
    policy_kwargs: Mapping[str, Any] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    total_env_steps: int = 1_000_000,
    seed: int = 1,
    device: str | torch.device = "cpu",
    **kernel_kwargs: Any,
) -> PodKernel:
    """A `PodKernel` built by names: a batched env (a `BATCHED_ENVS` name, or an instance), a
    registered policy and a registered algorithm with its config (or a dict of it). Seeds
    torch's global generator with `seed` first (policy init, action sampling, minibatches)."""
    import srl.algos  # noqa: F401  (registers "ppo")
    import srl.models  # noqa: F401  (registers "actor-critic-mlp")

    torch.manual_seed(seed)
    name = env if isinstance(env, str) else type(env).__name__
    if isinstance(env, str):
        env = make_batched_env(env, num_envs, device=device, seed=seed, **dict(env_kwargs or {}))
    from srl.graph.default_policy import choose_by_names  # `auto` (the config's default): chosen by the spaces

    policy = choose_by_names(policy, algorithm, env.observation_space, env.action_space).name
    net = registry.policies.get(policy)(env.observation_space, env.action_space, **dict(policy_kwargs or {}))
    net = net.to(env.device)
    entry = registry.algorithms.get(algorithm)
    config = algo if isinstance(algo, AlgorithmConfig) else entry.config_cls.model_validate(dict(algo or {}))
    trainer = entry.algorithm_cls(net, config, total_env_steps)
    kernel = PodKernel(env, net, trainer, sample_length, seed=seed, **kernel_kwargs)
    kernel.env_name = name
    return kernel
