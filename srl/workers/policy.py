"""Policy worker kernel: batched inference for many actors, always with the newest parameters.

`Acting` is the shared piece: it runs the policy over a list of inference slots. The policy
worker uses it for every request waiting at once (dynamic batching across actors); an actor with
dataflow.inference=inline uses the same object on its own slots, through `LocalInferenceClient` (the
actor's inference port with no stream behind it).

Deterministic mode (`sampling_seed` set) trades batching for reproducibility: each slot gets its
own forward pass, with torch's generator seeded from the request's key, so an action depends on
(seed, actor, split, step) only, never on which requests happened to share a batch.

A policy that declares `numpy_rollout` (srl.api.Policy) offers `rollout_numpy`, the same outputs
without torch (the random policy does); outside deterministic mode it is used instead.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from srl import devices
from srl.algos.colored_noise import ColoredActionNoise
from srl.algos.exploration import EpsilonGreedy
from srl.api.policy import Policy
from srl.data import columns as C
from srl.monitor.timing import INFERENCE, SEND_RECV, TimeBreakdown
from srl.spaces import Obs, concat_obs, map_obs, obs_of
from srl.streams.inference import InferenceServer, Request, Slot
from srl.streams.params import FixedParams, ParamSubscriber
from srl.streams.reports import Key, PolicyReport
from srl.streams.transport import Receiver
from srl.workers.cuda_acting import CudaActing, use_graphs
from srl.workers.hidden import HiddenStates
from srl.workers.kernel import KernelDefaults


def request_seed(seed: int, r: Request) -> int:
    """A seed for one request's sampling, from (seed, actor, split, key) only."""
    mixed = seed
    for part in (r.actor, r.split, r.key):
        mixed = (mixed * 1_000_003 + part + 1) % (1 << 62)
    return mixed


class Acting:
    def __init__(
        self,
        policy: Policy,
        params: ParamSubscriber | FixedParams,
        sampling_seed: int | None = None,
        clock: TimeBreakdown | None = None,
        exploration: EpsilonGreedy | None = None,
        action_noise: ColoredActionNoise | None = None,
        graphs: str = "auto",
    ) -> None:
        self.clock = clock or TimeBreakdown()  # the clock of the worker this runs in
        self.policy = policy.eval()
        self.exploration = exploration  # per-env epsilon-greedy over the policy's actions (DQN)
        self.action_noise = action_noise  # per-row colored noise the policy samples with (SAC)
        self.params = params
        # deterministic mode (sampling_seed set): a request's min_version counts the versions since
        # the first one this process loaded (0 at a run's start, the checkpoint's on run.resume)
        self.first_version: int | None = None
        self.sampling_seed = sampling_seed
        self.outputs = [C.ACTION, *policy.rollout_fields()]
        # recurrent policies: the state of each (actor, split) between its requests
        self.hidden = HiddenStates(policy.state_size) if policy.recurrent else None
        # torch.manual_seed also queues a seed for every accelerator backend, formatting a stack
        # trace for each (milliseconds per call); a CPU policy samples from the CPU generator only
        self.device = devices.of(policy)
        on_cpu = self.device.type == "cpu"
        self._seed = torch.default_generator.manual_seed if on_cpu else torch.manual_seed
        # torch's per-call overhead is most of a trivial policy's cost: skip it when offered (not
        # for a recurrent policy; it reads the weights as numpy arrays: host memory only)
        numpy_ok = policy.numpy_rollout and sampling_seed is None and action_noise is None
        self._rollout_numpy = policy.rollout_numpy if numpy_ok and self.hidden is None and on_cpu else None
        # on CUDA (srl.workers.cuda_acting): slot-to-device DMAs, one packed copy back, a sleeping
        # wait, CUDA graphs (`graphs`: devices.policy_graphs); chosen once, the CPU path is unchanged
        cuda_ok = self.device.type == "cuda" and self.hidden is None and action_noise is None
        self._cuda = CudaActing(self.policy, self.outputs, self.device,
                                use_graphs(graphs, self.device, policy, sampling_seed, action_noise)) if cuda_ok else None
        self.rows = 0  # rows acted on since the last report
        self.batches = 0
        self.infer_time_s = 0.0

    def actionable(self, requests: list[Request]) -> list[Request]:
        """The requests that the parameters at hand may answer (after loading the newest)."""
        # Outside deterministic mode parameters are read even with no request: a waiting worker
        # blocks on their socket too, and a message left unread there would wake it at once,
        # again and again (a busy spin). Lock-step mode must not skip ahead of its requests.
        if not requests and self.sampling_seed is not None:
            return []
        lock_step = self.sampling_seed is not None and not isinstance(self.params, FixedParams)
        waiting_for = 0  # lock step: the version its requests wait for, asked again if slow (srl.streams.params)
        if lock_step and requests and self.first_version is not None:
            waiting_for = self.first_version + min(r.min_version for r in requests)
        previous = self.clock.switch(SEND_RECV)
        self.params.poll(self.policy, waiting_for)
        self.clock.switch(previous)
        if self.first_version is None and self.params.version >= 0:
            self.first_version = self.params.version
        if not requests or self.first_version is None:
            return []
        # outside lock step any version will do (a trainer restarted from an older checkpoint goes
        # back below the first one), and so it will for fixed weights, which never change
        if not lock_step:
            return requests
        return [r for r in requests if r.min_version <= self.params.version - self.first_version]

    def __call__(self, slots: list[Slot], requests: list[Request]) -> None:
        started = time.perf_counter()
        previous = self.clock.switch(INFERENCE)
        if self.sampling_seed is None:
            self._act(slots, requests)
        else:
            for slot, r in zip(slots, requests):
                self._seed(request_seed(self.sampling_seed, r))
                self._act([slot], [r])
        if self.exploration is not None:
            for slot, r in zip(slots, requests):
                self.exploration(slot, r.actor, r.split)
        self.clock.switch(previous)
        self.batches += 1
        self.infer_time_s += time.perf_counter() - started

    def pin(self, slots: list[Slot]) -> None:
        """Register these slots' memory as pinned where acting is on CUDA (copies from them are
        DMAs); `close` unregisters it. Nothing to do on the CPU."""
        if self._cuda is not None:
            self._cuda.pin(slots)

    def close(self) -> None:
        if self._cuda is not None:
            self._cuda.close()

    @property
    def graphed(self) -> bool:
        """Whether acting replays CUDA graphs (it may turn eager if a capture fails)."""
        return self._cuda is not None and self._cuda.graphs

    def _act(self, slots: list[Slot], requests: list[Request]) -> None:
        if self._cuda is not None:
            self._fill(slots, self._cuda(slots))
            return
        # the "obs" array, or a dict leaf path -> array for Dict/Tuple observations (srl.spaces)
        obs = obs_of(slots[0]) if len(slots) == 1 else concat_obs([obs_of(s) for s in slots])
        if self._rollout_numpy is not None:
            out = self._rollout_numpy(obs)
        elif self.hidden is not None:
            out = self._act_recurrent(obs, slots, requests)
        else:
            with torch.inference_mode():
                if self.action_noise is None:
                    tensors = self.policy.rollout(map_obs(self._tensor, obs))
                else:
                    noise = np.concatenate([self.action_noise.draw(r.actor, r.split, len(slot[C.ACTION]))
                                            for slot, r in zip(slots, requests)])  # fmt: skip
                    # a rollout that takes `noise` (srl.config.checks asks the policy for one when action noise is on)
                    tensors = self.policy.rollout(  # type: ignore[call-arg]
                        map_obs(self._tensor, obs), noise=self._tensor(noise))
                out = {name: tensors[name].cpu().numpy() for name in self.outputs}  # no copy on the CPU
        self._fill(slots, out)

    def _fill(self, slots: list[Slot], out: dict[str, np.ndarray]) -> None:
        """The batch's outputs into each slot's rows, with the version that acted."""
        start = 0
        for slot in slots:
            stop = start + len(slot[C.ACTION])
            for name in self.outputs:
                slot[name][:] = out[name][start:stop]
            slot["version"][0] = self.params.version
            start = stop
        self.rows += start

    def _act_recurrent(self, obs: Obs, slots: list[Slot], requests: list[Request]) -> dict[str, np.ndarray]:
        assert self.hidden is not None
        keys, rows = [(r.actor, r.split) for r in requests], [len(s[C.ACTION]) for s in slots]
        first = np.concatenate([s[C.FIRST] for s in slots])
        state = self.hidden.gather(keys, rows)
        with torch.inference_mode():
            out, next_state = self.policy.rollout_recurrent(
                map_obs(self._tensor, obs), self._tensor(state), self._tensor(first)
            )
            self.hidden.scatter(keys, rows, next_state.cpu().numpy())
            return {name: out[name].cpu().numpy() for name in self.outputs}

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """A batch's array as a tensor on the policy's device: a view on the CPU, one copy to a GPU."""
        return torch.from_numpy(array).to(self.device)

    def report(self) -> PolicyReport:
        out: PolicyReport = {
            Key.ROWS: self.rows,
            Key.BATCHES: self.batches,
            Key.INFER_TIME_S: round(self.infer_time_s, 4),
            Key.POLICY_VERSION: self.params.version,
        }
        self.rows, self.batches, self.infer_time_s = 0, 0, 0.0
        return out


class LocalInferenceClient:
    """Actor side, inference inline in the actor: answered at once, no round trip."""

    def __init__(self, acting: Acting, slots: list[Slot], actor: int) -> None:
        self._acting = acting  # fills actions and outputs of slots
        self._slots = slots
        self._actor = actor
        self._pending: list[Request] = []
        self.receivers: list[Receiver] = acting.params.receivers

    def request(self, split: int, min_version: int = 0, key: int = 0) -> None:
        self._pending.append(Request(self._actor, split, min_version, key))

    def ready(self) -> list[int]:
        now = self._acting.actionable(self._pending)
        if now:
            # all pending is the usual case: skip comparing requests one by one
            full = len(now) == len(self._pending)
            self._pending = [] if full else [r for r in self._pending if r not in now]
            self._acting([self._slots[r.split] for r in now], now)
        return [r.split for r in now]


class PolicyWorkerKernel(KernelDefaults):
    def __init__(self, acting: Acting, server: InferenceServer, slots: dict[tuple[int, int], Slot]) -> None:
        self.acting = acting
        self.server = server
        self.slots = slots  # (actor, split) -> inference slot
        acting.pin(list(slots.values()))
        self._waiting: list[Request] = []
        self.clock = acting.clock

    @property
    def receivers(self) -> list[Receiver]:
        return self.server.receivers + self.acting.params.receivers

    def poll(self) -> bool:
        previous = self.clock.switch(SEND_RECV)
        self._waiting += self.server.poll(limit=len(self.slots))
        self.clock.switch(previous)
        now = self.acting.actionable(self._waiting)
        if not now:
            return False
        self._waiting = [r for r in self._waiting if r not in now]
        self.acting([self.slots[(r.actor, r.split)] for r in now], now)
        previous = self.clock.switch(SEND_RECV)
        self.server.reply(now)
        self.clock.switch(previous)
        return True

    def report(self) -> PolicyReport:
        return self.acting.report()

    def close(self) -> None:
        self.acting.close()
