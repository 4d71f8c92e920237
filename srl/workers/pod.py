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

Finished episodes are tracked on the device (running return and length per row); only the
finished ones cross to the host, once per rollout. `report()` has the keys both an actor's and
the trainer's reports have (see `srl.launch.monitor.RunMonitor.on_report`); `finish()` adds
"params_sha256". `srl.testing.pod.train_pod(...)` drives a pod to a target return in-process.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from srl import checkpoint
from srl.api import registry
from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.policy import FieldSpec, Policy
from srl.data import columns as C
from srl.envs.batched import BatchedTorchEnv, make_batched_env
from srl.faults import RunHalted
from srl.graph import space_spec
from srl.monitor.episodes import episodes_report
from srl.monitor.timing import TimeBreakdown
from srl.transfer import torch_dtype
from srl.workers.learner import resume_latest
from srl.workers.nonfinite import UpdateGuard
from srl.workers.stop import LockStepStop


class PodKernel:
    """Env, policy and algorithm on one device; see the module doc.

    `policy` must already live on `env.device` (build the algorithm after moving it, so the
    optimizer holds the device's parameters). `seed` seeds the env's first reset. With a
    `run_dir`, checkpoints are written every `checkpoint_interval_s` and by `finish()`, in the
    trainer's format (`srl.checkpoint`); `run.resume=True` continues from the newest usable one there
    of run `run_id`. A rollout with a NaN or an infinity ends the run (a pod cannot restart one env
    of its batch); an update that leaves one is undone (srl.workers.nonfinite.UpdateGuard).
    """

    def __init__(
        self,
        env: BatchedTorchEnv,
        policy: Policy,
        algorithm: Algorithm,
        sample_length: int,
        seed: int = 0,
        run_dir: Path | str | None = None,
        checkpoint_interval_s: float = 60.0,
        resume: bool = False,
        stop: LockStepStop | None = None,
        run_id: str | None = None,
        max_nonfinite_updates: int = 10,
    ) -> None:
        if sample_length < 1:
            raise ValueError(f"sample_length must be >= 1, got {sample_length}")
        self.env, self.policy, self.algorithm = env, policy, algorithm
        self.env_name = type(env).__name__  # make_pod names it as configured
        self.device = env.device
        devices = {p.device for p in policy.parameters()}
        if devices and devices != {self.device}:
            raise ValueError(
                f"the policy's parameters are on {sorted(map(str, devices))}, the env on {self.device}"
            )
        self.T = int(sample_length)
        self.seed = int(seed)
        self.rows = env.num_rows
        self.num_agents = env.num_agents
        self.run_dir = None if run_dir is None else Path(run_dir)
        self.checkpoint_interval_s = checkpoint_interval_s

        fields = {
            C.OBS: space_spec(env.observation_space),
            C.ACTION: space_spec(env.action_space),
            **policy.rollout_fields(),
        }
        self.outputs = [name for name in fields if name != C.OBS]  # what rollout writes
        fields |= {C.REWARD: FieldSpec((), np.float32), C.TERMINATED: FieldSpec((), np.bool_),
                   C.TRUNCATED: FieldSpec((), np.bool_), C.POLICY_VERSION: FieldSpec((), np.int64)}
        with torch.inference_mode(False):
            self.buffers: dict[str, torch.Tensor] = {
                name: torch.zeros(self.T + 1, self.rows, *spec.shape, dtype=torch_dtype(spec.dtype), device=self.device)
                for name, spec in fields.items()
            }
            # episode accounting, on the device
            self._running_return = torch.zeros(self.rows, dtype=torch.float64, device=self.device)
            self._running_length = torch.zeros(self.rows, dtype=torch.int64, device=self.device)
            self._ended_return = torch.zeros(self.T, self.rows, dtype=torch.float64, device=self.device)
            self._ended_length = torch.zeros(self.T, self.rows, dtype=torch.int64, device=self.device)
            self._done = torch.zeros(self.T, self.rows, dtype=torch.bool, device=self.device)

        self.version = 0
        self.env_steps_total = 0  # env steps consumed by updates (drives schedules), across resumes
        self._last_checkpoint_s = time.monotonic()
        self.run_id = run_id
        self.guard = UpdateGuard(policy, algorithm, max_nonfinite_updates)
        resumed = resume_latest(self.run_dir, run_id, policy, algorithm, "pod") if resume and self.run_dir else None
        if resumed is not None:
            self.version, self.env_steps_total = resumed["version"], resumed["env_steps"]
        self.stop = stop  # deterministic mode: the run's stop rules, decided here (srl.workers.stop)
        self.stats: dict[str, float] = {}  # the latest update's (kept across reports)
        self.lag_mean: float | None = None
        self._reset_stats()
        self.started = False
        self.receivers: list = []  # nothing to wait on: a pod only computes
        self.clock = TimeBreakdown()  # its env/infer/train times are in its reports; the loop labels waiting

    # -- counters ---------------------------------------------------------------------------------

    def _reset_stats(self) -> None:
        self.env_steps = 0  # since the last report
        self.updates = 0
        self.finished_returns: list[float] = []
        self.finished_lengths: list[int] = []
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
        if self.stop is not None and self.stop.reason is not None:
            return False  # done: the last update's parameters are final
        returns = self._rollout()
        self._check_finite()
        self._update()
        if self.stop is not None:  # from this rollout alone, whatever the reports' timing
            self.stop.after_update(self.version, self.env_steps_total, returns)
        due = time.monotonic() - self._last_checkpoint_s > self.checkpoint_interval_s
        if self.run_dir is not None and due:
            self.save_checkpoint()
        return True

    def _act(self, t: int) -> None:
        """policy.rollout on row t's obs; outputs (inference tensors) copied into row t."""
        started = time.perf_counter()
        buf = self.buffers
        out = self.policy.rollout(buf[C.OBS][t])
        for name in self.outputs:
            buf[name][t].copy_(out[name].reshape(buf[name][t].shape))
        buf[C.POLICY_VERSION][t].fill_(self.version)
        self.infer_time_s += time.perf_counter() - started

    def _rollout(self) -> list[float]:
        """T steps of every env; the returns of the episodes that ended, in (step, row) order."""
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
            # one transfer of the finished episodes (a sync point on a GPU, once per rollout)
            returns = self._ended_return[done].tolist()
            self.finished_returns += returns
            self.finished_lengths += self._ended_length[done].tolist()
        self.env_time_s += env_time
        self.env_steps += self.T * env.num_envs
        return returns

    def _check_finite(self) -> None:
        """One check of the rollout's rewards and observations (one device sync, as the episode
        transfer is); a NaN or an infinity ends the run, naming where it was."""
        reward, obs = self.buffers[C.REWARD][: self.T], self.buffers[C.OBS][1:]
        floating = obs.is_floating_point()
        if bool(torch.isfinite(reward).all()) and (not floating or bool(torch.isfinite(obs).all())):
            return
        bad_reward = ~torch.isfinite(reward)
        field = "reward" if bool(bad_reward.any()) else "observation"
        bad = bad_reward if field == "reward" else ~torch.isfinite(obs.reshape(*obs.shape[:2], -1)).all(-1)
        t, row = (int(i) for i in bad.nonzero()[0])
        raise RunHalted(f"env {self.env_name!r} returned a non-finite {field} at env index "
                        f"{row // self.num_agents} (pod, rollout step {t} after version {self.version}): the run ends "
                        "(a pod cannot restart one env of its batch)")

    def _update(self) -> None:
        started = time.perf_counter()
        steps = self.T * self.env.num_envs
        stats = self.guard.step(self.buffers, self.env_steps_total + steps)
        # lag of the trained rows 0..T-1: row 0 was acted by the previous version (none before
        # the first update), rows 1..T-1 by this one
        self.lag_mean = (1.0 if self.version > 0 else 0.0) / self.T
        if stats is not None:  # else undone (non-finite): no new version, not trained on
            self.stats = stats
            self.env_steps_total += steps
            self.version += 1
            self.updates += 1
        with torch.inference_mode(False), torch.no_grad():
            for tensor in self.buffers.values():  # the bootstrap row becomes row 0
                tensor[0].copy_(tensor[self.T])
        self.train_time_s += time.perf_counter() - started

    # -- reports ----------------------------------------------------------------------------------

    def report(self) -> dict:
        """Since the last report: env steps, finished episodes, updates, times; and the latest
        update's algorithm stats and policy lag (kept until the next update). The keys of an
        actor's report and of the trainer's report together."""
        out: dict[str, Any] = {
            "env_steps": self.env_steps,
            **episodes_report(self.finished_returns, self.finished_lengths),
            "env_time_s": round(self.env_time_s, 4),
            "infer_time_s": round(self.infer_time_s, 4),
            "train_time_s": round(self.train_time_s, 4),
            "policy_version": self.version,
            "trained_env_steps": self.env_steps_total,
            "updates": self.updates,
            "segments_dropped": 0,
            "policy_lag_mean": self.lag_mean,
            "nonfinite_updates_skipped": self.guard.skipped,
            **self.stats,
        }
        self.guard.skipped = 0
        if self.stop is not None:
            out.update(self.stop.report())  # the stop and its kind (srl.workers.stop)
        self._reset_stats()
        return out

    def save_checkpoint(self) -> None:
        assert self.run_dir is not None
        checkpoint.save(
            self.run_dir, self.version, self.env_steps_total, self.policy, self.algorithm.state_dict(),
            run_id=self.run_id,
        )
        self._last_checkpoint_s = time.monotonic()

    def finish(self) -> dict:
        if self.run_dir is not None:
            self.save_checkpoint()
        return {**self.report(), "params_sha256": checkpoint.params_sha256(self.policy)}

    def close(self) -> None:
        self.env.close()


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
    from srl.default_policy import choose_by_names  # `auto` (the config's default): chosen by the spaces

    policy = choose_by_names(policy, algorithm, env.observation_space, env.action_space).name
    net = registry.policies.get(policy)(env.observation_space, env.action_space, **dict(policy_kwargs or {}))
    net = net.to(env.device)
    entry = registry.algorithms.get(algorithm)
    config = algo if isinstance(algo, AlgorithmConfig) else entry.config_cls.model_validate(dict(algo or {}))
    trainer = entry.algorithm_cls(net, config, total_env_steps)
    kernel = PodKernel(env, net, trainer, sample_length, seed=seed, **kernel_kwargs)
    kernel.env_name = name
    return kernel
