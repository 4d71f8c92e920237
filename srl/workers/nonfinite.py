"""NaN and infinity kept out of what is learned: at the env step that makes them, and at the update.

One NaN observation spreads: the batch's loss is NaN, Adam writes NaN into every weight, every
later action and checkpoint is NaN. So values are checked where they enter:

* `EnvGuard` (actors): each step's observations and rewards, by one sum over each of the group's
  batch arrays per step (a NaN or an infinity makes its sum one; only then are the values looked at). On a bad value, `dataflow.nonfinite_env=error` ends the run naming
  the env, env index and field; `skip_episode` mends the step before anything records it
  (below), restarts that env, and drops its episode from the returns. The actor's first skip gets
  a line on the console, every one is counted (`nonfinite_episodes_skipped`), and an env that
  keeps poisoning ends the run (`SkipLimit`): skipping is for a rare bad value, not for an env
  whose every episode is dropped while the run seems to train.
* `UpdateGuard` (trainers, pods): an update that leaves a NaN or an infinity in the policy or the
  algorithm's state (a non-finite loss or gradient puts it there through the optimizer) is
  undone (state as before it, no new version) and counted; more than `max_nonfinite_updates` in
  a row end the run.

What a mended step holds (row t of the segment, obs t + 1 in the inference slot): a non-finite
reward becomes 0; a row whose episode was still running is marked truncated, so neither GAE nor
n-step returns bootstrap across it (both bootstrap a truncation from the last observed state,
srl.algos.gae, srl.data.nstep), and obs t + 1 is the first observation of the env's new episode.
No value the env returned non-finite reaches a segment.
"""

from __future__ import annotations

import math
import sys
from collections import deque
from typing import Any

import numpy as np
import torch

from srl.api.algorithm import Algorithm
from srl.api.env import VectorEnv
from srl.faults import RunHalted, first_nonfinite
from srl.monitor.episodes import WINDOW
from srl.spaces import Obs, assign, num_rows

ERROR, SKIP_EPISODE = "error", "skip_episode"


class SkipLimit:
    """An actor's skipped episodes (`dataflow.nonfinite_env=skip_episode`), shared by its ring groups'
    guards: the first skip gets a line on the console, and the run ends once more than
    `max_fraction` (`dataflow.max_skipped_fraction`) of the last `window` episodes the actor ended,
    finished or skipped, were skipped.

    Found with an env whose every step is NaN: before, 229,760 episodes were skipped in 20 s, the
    run ended with exit 0 and not one line said so. Such an env now ends the run within its first
    `window` episode ends (tests/test_integrity.py). Nothing is kept before the first skip, so a
    healthy run pays one attribute test per step; after it, one tuple per step that ends episodes."""

    def __init__(self, env_name: str, actor: int, max_fraction: float, window: int = WINDOW) -> None:
        self.env_name, self.actor, self.max_fraction, self.window = env_name, actor, max_fraction, window
        self.first: str | None = None  # what the first skip was ('env NAME returned ... (actor A)')
        self._steps: deque[tuple[int, int]] = deque()  # (skipped, finished) of each step that ended some
        self._skipped = self._ended = 0  # their sums

    @property
    def watching(self) -> bool:
        """Whether an episode was skipped yet (before that, no window is kept)."""
        return self.first is not None

    def on_first(self, description: str) -> None:
        if self.first is None:
            self.first = description
            print(f"srl: {description}: its episode is skipped (dataflow.nonfinite_env=skip_episode); every skip "
                  "is counted in nonfinite_episodes_skipped", file=sys.stderr, flush=True)

    def step(self, skipped: int, finished: int) -> None:
        """One step's episode ends; RunHalted once the window holds too many skips. The window is
        whole steps: the oldest goes once the rest still hold `window` ends."""
        if not skipped and not finished:
            return
        self._steps.append((skipped, finished))
        self._skipped += skipped
        self._ended += skipped + finished
        while self._ended - sum(self._steps[0]) >= self.window:
            old_skipped, old_finished = self._steps.popleft()
            self._skipped -= old_skipped
            self._ended -= old_skipped + old_finished
        if self._ended >= self.window and self._skipped > self.max_fraction * self._ended:
            raise RunHalted(
                f"env {self.env_name!r} returned a NaN or an infinity in {self._skipped} of the last {self._ended} "
                f"episodes of actor {self.actor}, more than dataflow.max_skipped_fraction={self.max_fraction:g} of "
                f"them (each skipped: dataflow.nonfinite_env=skip_episode): the run ends. The first: {self.first}"
            )


class EnvGuard:
    """Checks one ring group's steps: env indices `first_env_index` + 0 .. num_envs - 1. With
    skip_episode, `skips` is its actor's SkipLimit (every group's guard holds the same one; the
    actor feeds it each step's episode ends)."""

    def __init__(self, mode: str, env_name: str, first_env_index: int, agents: int, actor: int,
                 skips: SkipLimit | None = None) -> None:
        assert mode in (ERROR, SKIP_EPISODE), mode
        self.mode, self.env_name, self.first_env_index = mode, env_name, first_env_index
        self.agents, self.actor, self.skips = agents, actor, skips
        self._obs: Obs | None = None  # the observation arrays last checked (an actor's slot: always the same)
        self._floats: list[np.ndarray] = []  # and their floating leaves

    def bad_rows(self, obs: Obs, reward: np.ndarray) -> np.ndarray | None:
        """Rows of the envs (all their agents) with a non-finite value; None if there is none.
        Integer observations (images, discrete) cannot hold one and are not scanned; a Dict or
        Tuple observation is scanned leaf by leaf (srl.spaces)."""
        if obs is not self._obs:
            self._obs, self._floats = obs, _float_leaves(obs)
        # a sum is finite only if every value is (NaN and inf spread; +inf + -inf is NaN); finite
        # values whose sum overflows are told apart below
        total = float(_SUM(reward, None))
        for leaf in self._floats:
            total += float(_SUM(leaf, None))
        if math.isfinite(total):
            return None
        bad = ~np.isfinite(reward) | _bad_obs_rows(obs)
        if not bad.any():
            return None
        return np.repeat(bad.reshape(-1, self.agents).any(axis=1), self.agents)

    def mend(
        self, env: VectorEnv, rows: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
        truncated: np.ndarray, obs: Obs,
    ) -> np.ndarray:
        """Make the recorded step finite in place (see the module doc) and restart the bad envs;
        returns the rows whose episode is dropped from the returns. Raises RunHalted where the
        mode is `error`, or where the env cannot restart one env or restarts it non-finite."""
        if self.mode == ERROR:
            raise RunHalted(self._describe(rows, reward, obs) + ": the run ends (nonfinite_env=error); "
                            "dataflow.nonfinite_env=skip_episode drops such episodes and goes on")
        if self.skips is not None and not self.skips.watching:  # (described before the step is mended)
            self.skips.on_first(self._describe(rows, reward, obs))
        done = terminated | truncated
        bad_reward = ~np.isfinite(reward)
        # an episode that ended with a finite reward is whole: only its successor's first obs was bad
        dropped = rows & (~done | bad_reward)
        reward[bad_reward] = 0.0
        truncated[rows & ~done] = True
        for e in np.flatnonzero(rows[:: self.agents]):
            assign(obs, self._reset(env, int(e), rows, reward, obs), slice(e * self.agents, (e + 1) * self.agents))
        if _bad_obs_rows(obs)[rows].any():
            raise RunHalted(self._describe(rows, reward, obs) + " right after a reset: the run ends "
                            "(dataflow.nonfinite_env=skip_episode restarts an env, and this one starts non-finite)")
        return dropped

    def _reset(self, env: VectorEnv, e: int, rows: np.ndarray, reward: np.ndarray, obs: Obs) -> Obs:
        try:
            return env.reset_env(e)
        except NotImplementedError:
            raise RunHalted(
                self._describe(rows, reward, obs) + f", and {type(env).__name__} cannot restart one env "
                "(VectorEnv.reset_env), which dataflow.nonfinite_env=skip_episode needs: the run ends"
            ) from None

    def _describe(self, rows: np.ndarray, reward: np.ndarray, obs: Obs) -> str:
        """'env NAME returned a non-finite FIELD (VALUE) at env index I (actor A)' for the first bad row."""
        bad = ~np.isfinite(reward) | _bad_obs_rows(obs)
        row = int(np.flatnonzero(rows & bad)[0])  # a row of the env that is bad
        if not np.isfinite(reward[row]):
            field, value = "reward", float(reward[row])
        else:
            leaves = obs if isinstance(obs, dict) else {"": obs}
            path, flat = next((p, a[row].ravel()) for p, a in leaves.items()
                              if a.dtype.kind == "f" and not np.isfinite(a[row]).all())
            field = f"observation (key {path!r})" if path else "observation"
            value = float(flat[~np.isfinite(flat)][0])
        index = self.first_env_index + row // self.agents
        return f"env {self.env_name!r} returned a non-finite {field} ({value}) at env index {index} (actor {self.actor})"


_SUM = np.add.reduce  # (the ufunc itself: ndarray.sum adds two Python calls)


def _float_leaves(obs: Obs) -> list[np.ndarray]:
    return [leaf for leaf in (obs.values() if isinstance(obs, dict) else [obs]) if leaf.dtype.kind == "f"]


def _bad_obs_rows(obs: Obs) -> np.ndarray:
    """Rows with a non-finite value in any floating leaf of the observation."""
    bad = np.zeros(num_rows(obs), bool)
    for leaf in _float_leaves(obs):
        bad |= ~np.isfinite(leaf.reshape(len(leaf), -1)).all(axis=1)
    return bad


class UpdateGuard:
    """`algorithm.step` that is undone when it leaves a non-finite value in the policy or in the
    algorithm's state_dict (the optimizer's moments, a target network, value normalization).

    It keeps a copy of that state as the next update starts from it: after each good update its
    tensors are copied into buffers kept for the purpose (one foreach copy; values that are not
    tensors, e.g. an update count, are kept as they are). Per update that costs a walk over the
    state, the copy and one norm per tensor to check it: about 0.1 ms for a CartPole network, a
    few per cent of a small DQN update, far less of anything larger."""

    def __init__(self, policy: torch.nn.Module, algorithm: Algorithm, max_in_a_row: int) -> None:
        self.policy, self.algorithm, self.max_in_a_row = policy, algorithm, max_in_a_row
        self.skipped = 0  # since the owner last reset it (its report)
        self.in_a_row = 0
        self._saved: list[torch.Tensor] = []  # the tensors of the state the next update starts from
        self._layout: list[tuple[Any, Any]] = []  # their shapes and dtypes
        self._skeleton: Any = None  # that state with each tensor replaced by its index in _saved

    def step(self, batch: dict[str, torch.Tensor], env_steps: int) -> dict[str, float] | None:
        """The update's stats, or None when it was undone."""
        if self._skeleton is None:  # the first update: keep the state it starts from
            tensors: list[torch.Tensor] = []
            self._keep(_skeleton(self._state(), tensors), tensors)
        stats = self.algorithm.step(batch, env_steps)
        tensors = []
        skeleton = _skeleton(self._state(), tensors)
        bad = None if _all_finite(tensors) else first_nonfinite(self._state())  # (None: a norm overflowed)
        if bad is None:
            self._keep(skeleton, tensors)
            self.in_a_row = 0
            return stats
        self._restore()
        self.skipped += 1
        self.in_a_row += 1
        if self.in_a_row > self.max_in_a_row:
            raise RunHalted(
                f"{self.in_a_row} updates in a row made {bad} non-finite (each one undone; "
                f"launch.max_nonfinite_updates={self.max_in_a_row}): the run ends, the last good checkpoint is kept"
            )
        if self.in_a_row == 1:  # one line per streak, not per update
            print(f"srl: update undone: it made {bad} non-finite (counted in nonfinite_updates_skipped)",
                  file=sys.stderr, flush=True)
        return None

    def _state(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "algorithm": self.algorithm.state_dict()}

    def _keep(self, skeleton: Any, tensors: list[torch.Tensor]) -> None:
        layout = [(t.shape, t.dtype) for t in tensors]
        if layout == self._layout:
            if tensors:  # (a policy without parameters has none)
                torch._foreach_copy_(self._saved, tensors)
        else:  # the first time, or the state changed its layout
            self._saved, self._layout = [t.detach().clone() for t in tensors], layout
        self._skeleton = skeleton

    def _restore(self) -> None:
        # clones: a load_state_dict may keep the tensors it is given (srl.algos.value_norm does)
        load_state(self.policy, self.algorithm, _filled(self._skeleton, [t.clone() for t in self._saved]))


def load_state(policy: torch.nn.Module, algorithm: Algorithm, state: dict[str, Any]) -> None:
    """The policy and algorithm state of a checkpoint (srl.checkpoint), or of UpdateGuard's copy."""
    policy.load_state_dict(state["policy"])
    algorithm.load_state_dict(state["algorithm"])


class _Slot(int):
    """Where a tensor goes back into a skeleton (an int subclass: no value of a state is one)."""


def _skeleton(tree: Any, tensors: list[torch.Tensor]) -> Any:
    """`tree` with each tensor replaced by a _Slot, its index in `tensors` (appended to)."""
    if isinstance(tree, torch.Tensor):
        tensors.append(tree)
        return _Slot(len(tensors) - 1)
    if isinstance(tree, dict):
        return {k: _skeleton(v, tensors) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_skeleton(v, tensors) for v in tree)
    return tree


def _filled(skeleton: Any, tensors: list[torch.Tensor]) -> Any:
    if isinstance(skeleton, _Slot):
        return tensors[skeleton]
    if isinstance(skeleton, dict):
        return {k: _filled(v, tensors) for k, v in skeleton.items()}
    if isinstance(skeleton, (list, tuple)):
        return type(skeleton)(_filled(v, tensors) for v in skeleton)
    return skeleton


def _all_finite(tensors: list[torch.Tensor]) -> bool:
    """Every floating tensor is finite: one foreach norm per device and dtype (a norm overflows
    only for values far beyond any sane parameter; first_nonfinite then decides, one by one)."""
    groups: dict[Any, list[torch.Tensor]] = {}
    for t in tensors:
        if t.is_floating_point():
            groups.setdefault((t.device, t.dtype), []).append(t)
    return all(bool(torch.stack(torch._foreach_norm(ts)).isfinite().all()) for ts in groups.values())


class DeviceUpdateGuard:
    """`UpdateGuard` for a pod, decided on the device: nothing is read back to the host.

    The algorithm's `device_step` (stats as device tensors) runs; then one foreach norm over the
    floating tensors of the policy and the algorithm's state gives a device flag `ok` (every norm
    finite, and the rollout finite: `rollout_ok`), and every state tensor becomes
    `where(ok, new, saved)` while the saved copy becomes the state again. A bad update is so
    undone without the host knowing (the host waiting for that flag every update was one of the
    syncs that kept a pod's iteration out of a CUDA graph, issue 35). The counts (`skipped_t`,
    `in_a_row_t`) and which tensor went bad first (`first_bad_t`, an index into `names`, -1 for
    the rollout) stay device tensors for the pod to read at its reports. A norm that overflows
    on finite values counts as non-finite here (UpdateGuard looks closer; a pod's tiny networks
    are nowhere near 1e38)."""

    def __init__(self, policy: torch.nn.Module, algorithm: Algorithm, max_in_a_row: int, device: torch.device) -> None:
        self.policy, self.algorithm, self.max_in_a_row = policy, algorithm, max_in_a_row
        self._saved: list[torch.Tensor] | None = None
        self.names: list[str] = []  # the state tensors' paths ("policy.actor_head.weight", ...)
        self.float_names: list[str] = []  # those of the floating ones (first_bad_t indexes these)
        step = getattr(algorithm, "device_step", None)
        self._device_step = step if step is not None else self._host_step
        with torch.inference_mode(False):
            self.skipped_t = torch.zeros((), dtype=torch.int64, device=device)  # every update undone so far
            self.in_a_row_t = torch.zeros((), dtype=torch.int64, device=device)
            self.first_bad_t = torch.zeros((), dtype=torch.int64, device=device)  # of the last undone
            self.ok = torch.ones((), dtype=torch.bool, device=device)  # the last update was kept

    def _host_step(self, batch: dict[str, torch.Tensor], env_steps: torch.Tensor) -> dict[str, torch.Tensor]:
        """An algorithm without `device_step`: its `step`, which reads to the host (not capturable)."""
        stats = self.algorithm.step(batch, int(env_steps))
        return {k: torch.as_tensor(float(v), dtype=torch.float32, device=env_steps.device) for k, v in stats.items()}

    def _tensors(self) -> list[torch.Tensor]:
        names: list[str] = []
        tensors: list[torch.Tensor] = []
        _named_tensors({"policy": self.policy.state_dict(), "algorithm": self.algorithm.state_dict()}, "", names, tensors)
        self.names = names
        return tensors

    def step(self, batch: dict[str, torch.Tensor], env_steps: torch.Tensor, rollout_ok: torch.Tensor) -> dict[str, torch.Tensor]:
        """The update's stats (device tensors), kept or undone on the device (`self.ok` says which)."""
        if self._saved is None:  # the first update: keep the state it starts from
            self._saved = [t.detach().clone() for t in self._tensors()]
        stats = self._device_step(batch, env_steps)
        tensors = self._tensors()
        if len(tensors) != len(self._saved):
            raise RuntimeError(f"the policy's and algorithm's state changed from {len(self._saved)} to {len(tensors)} "
                               "tensors between updates; a pod's update guard needs a fixed layout")
        floats = [t for t in tensors if t.is_floating_point()]
        self.float_names = [n for n, t in zip(self.names, tensors) if t.is_floating_point()]
        if floats:
            finite = torch.isfinite(torch.stack([n.to(torch.float64) for n in _norms(floats)]))
            all_finite = finite.all()
            first = torch.where(all_finite, -1, (~finite).long().argmax())
        else:
            all_finite, first = rollout_ok, torch.full_like(self.first_bad_t, -1)
        ok = all_finite & rollout_ok
        with torch.no_grad():
            kept = [torch.where(ok, t, s) for t, s in zip(tensors, self._saved)]
            torch._foreach_copy_(tensors, kept)
            torch._foreach_copy_(self._saved, tensors)
            self.ok.copy_(ok)
            self.skipped_t.add_((~ok).long())
            self.in_a_row_t.copy_(torch.where(ok, 0, self.in_a_row_t + 1))
            self.first_bad_t.copy_(torch.where(ok, self.first_bad_t, first))
        return stats

    def describe(self, first_bad: int) -> str:
        return "the rollout (a NaN or an infinity from the env)" if first_bad < 0 else self.float_names[first_bad]


def _norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """One foreach norm per dtype (foreach ops take one dtype), in the tensors' order."""
    out: list[torch.Tensor | None] = [None] * len(tensors)
    groups: dict[Any, list[int]] = {}
    for k, t in enumerate(tensors):
        groups.setdefault(t.dtype, []).append(k)
    for ks in groups.values():
        for k, norm in zip(ks, torch._foreach_norm([tensors[k] for k in ks])):
            out[k] = norm
    return [n for n in out if n is not None]


def _named_tensors(tree: Any, path: str, names: list[str], tensors: list[torch.Tensor]) -> None:
    if isinstance(tree, torch.Tensor):
        names.append(path)
        tensors.append(tree)
    elif isinstance(tree, dict):
        for k, v in tree.items():
            _named_tensors(v, f"{path}.{k}" if path else str(k), names, tensors)
    elif isinstance(tree, (list, tuple)):
        for k, v in enumerate(tree):
            _named_tensors(v, f"{path}.{k}", names, tensors)
