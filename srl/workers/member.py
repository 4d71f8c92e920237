"""Ensemble member kernel: a pod that evaluates itself and can become a copy of another member.

    poll():  pod.poll()                              # one rollout + one update
             every eval_interval_updates updates:
                 return = evaluate()                 # greedy actions, fixed seed, one episode per eval env
                 queue an eval event (srl.population.tournament.Entry fields), its "state" the
                 weights + optimizer state + hyperparameters as bytes (a checkpoint's content)
    report()                                         # the pod's report + "evals": events queued (up to
                                                     # MAX_ATTACHED: each state a frame of the report)
    command({"type": "adopt", "adoption": n, "state": bytes, "hparams": {...}})
        adopt(state, hparams)                        # weights and optimizer state of the state,
                                                     # the given hyperparameters (a perturbed copy)

A member is the worker pod:<index> of the graph, run by any launcher's shell like every worker:
its reports go to the controller, whose population manager (srl.population.ensemble) takes the
events and sends adopts on the control stream. The weights travel with the report and the adopt,
as their attachments (srl.streams.control.detach), not as files: a member on another node needs
no disk it shares with the controller, which keeps the entries' files in its own run directory.
Every member evaluates on the same seed, so the start states are common and the ranking compares
policies, not luck.

A member checkpoints as a pod does, in run_dir/members/m<index>/, and at once after an adopt,
beside member.json (its adoptions and hyperparameters): restarted, or resumed with the run, it
continues from there. Adopt n is taken once: a repeat (the manager resends until a report shows
it) changes nothing.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ValidationError

from srl.devices import resolve
from srl.envs.batched import BatchedTorchEnv, TorchVectorEnv
from srl.evaluation import Player, play
from srl.monitor.episodes import ReturnWindow
from srl.storage import write_text_atomic
from srl.streams.control import MAX_ATTACHED
from srl.streams.reports import Key, MemberEval, PodReport
from srl.workers.learner import LearnerSettings
from srl.workers.nonfinite import load_state
from srl.workers.pod import PodKernel


class PodMember:
    def __init__(
        self,
        index: int,
        pod: PodKernel,
        eval_env: BatchedTorchEnv | None,
        folder: Path | str,
        eval_interval_updates: int = 10,
        eval_seed: int = 0,
        hparam_names: tuple[str, ...] = ("lr",),
        resume: bool = False,
    ) -> None:
        if eval_interval_updates < 1:
            raise ValueError(f"eval_interval_updates must be >= 1, got {eval_interval_updates}")
        config = pod.algorithm.config
        missing = [n for n in hparam_names if not isinstance(getattr(config, n, None), float)]
        if missing:
            raise ValueError(f"{type(config).__name__} has no float hyperparameters {missing}")
        self.index, self.pod, self.eval_env = index, pod, eval_env
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.eval_interval_updates = eval_interval_updates
        self.eval_seed = eval_seed
        self.hparam_names = tuple(hparam_names)
        self.updates_since_eval = 0
        self.adoptions = 0
        self.events: list[MemberEval] = []
        self.recent = ReturnWindow(100)  # training episodes: the score when there is no eval env
        self.receivers: list = []  # a member only computes: nothing to wait on
        self.clock = pod.clock
        if resume:
            self._resume()

    def _resume(self) -> None:
        """Its adoptions and hyperparameters as its checkpoint left them."""
        state = self.folder / STATE_FILE
        if state.is_file():
            saved = json.loads(state.read_text())
            self.adoptions = int(saved["adoptions"])
            self._set_hparams(saved["hparams"])

    def start(self) -> None:
        self.pod.start()

    def poll(self) -> bool:
        pod = self.pod
        seen = len(pod.finished_returns)  # pod.report() empties these lists; only new ones count
        pod.poll()
        pod.sync()  # this update's episodes, per update (a member scores itself from them)
        self.recent.add(pod.finished_returns[seen:], pod.finished_lengths[seen:])
        self.updates_since_eval += 1
        if self.updates_since_eval >= self.eval_interval_updates and (self.eval_env is not None or len(self.recent)):
            self.updates_since_eval = 0
            self.events.append(self.evaluate_and_pack())
        return True

    # -- evaluation -------------------------------------------------------------------------------

    def hparams(self) -> dict[str, float]:
        config = self.pod.algorithm.config
        return {name: float(getattr(config, name)) for name in self.hparam_names}

    def evaluate(self) -> float:
        """Mean return of one episode per eval env (per row: agents of an env share theirs), greedy.
        Without an eval env: the mean return of its last 100 training episodes (free, but
        stochastic actions, and partly played by the weights before the last updates)."""
        env, policy = self.eval_env, self.pod.policy
        if env is None:
            mean = self.recent.mean_return
            assert mean is not None  # poll evaluates without an eval env only once there are episodes
            return float(mean)
        training = policy.training
        played = play(TorchVectorEnv(env), [Player(policy)], env.num_envs, self.eval_seed)  # srl.evaluation
        policy.train(training)  # the Player set it acting; the pod trains on
        return float(np.mean([e.returns.mean() for e in played]))

    def evaluate_and_pack(self) -> MemberEval:
        """An evaluation event, with the weights evaluated: what the controller keeps if they rank."""
        eval_return = self.evaluate()
        pod = self.pod
        state = {
            "version": pod.version, "env_steps": pod.trained_env_steps, "policy": pod.policy.state_dict(),
            "algorithm": pod.algorithm.state_dict(), "hparams": self.hparams(),
        }
        packed = io.BytesIO()
        torch.save(state, packed)
        return {
            Key.MEMBER: self.index, Key.ENV_STEPS: pod.trained_env_steps, Key.EVAL_RETURN: eval_return,
            Key.HPARAMS: self.hparams(), Key.STATE: packed.getvalue(), Key.ADOPTIONS: self.adoptions,
        }

    def take_events(self) -> list[MemberEval]:
        """The oldest events queued, as many as one report attaches (the rest go in the next)."""
        events, self.events = self.events[:MAX_ATTACHED], self.events[MAX_ATTACHED:]
        return events

    def command(self, command: dict[str, Any]) -> None:
        """The population manager's command: adopt number `adoption` (taken once)."""
        if command.get("type") != "adopt":
            raise ValueError(f"member {self.index}: unknown command {command.get('type')!r}")
        if int(command["adoption"]) > self.adoptions:
            self.adopt(command["state"], command["hparams"])
            self.adoptions = int(command["adoption"])
            self._save_state()

    # -- replacement ------------------------------------------------------------------------------

    def adopt(self, packed: bytes, hparams: dict[str, float]) -> None:
        """Become the policy of `packed` (an evaluation's state, as `evaluate_and_pack` makes it),
        with its optimizer state, under `hparams`."""
        unknown = sorted(set(hparams) - set(self.hparam_names))
        if unknown:
            raise ValueError(f"member {self.index}: cannot set hyperparameters {unknown}")
        # tensors and plain values only (weights_only): the bytes came over a stream
        state = torch.load(io.BytesIO(packed), map_location=self.pod.device, weights_only=True)
        load_state(self.pod.policy, self.pod.algorithm, state)
        self._set_hparams(hparams)
        self.recent = ReturnWindow(100)  # those episodes were the replaced weights
        self.updates_since_eval = 0
        self.adoptions += 1

    def _set_hparams(self, hparams: dict[str, float]) -> None:
        config = self.pod.algorithm.config
        for name, value in hparams.items():  # a value outside the field's range (gamma > 1) is not taken
            try:
                config = type(config).model_validate({**config.model_dump(), name: value})
            except ValidationError:
                pass
        self.pod.algorithm.config = config

    def _save_state(self) -> None:
        """A checkpoint of the adopted weights, then member.json: a restart continues the copy."""
        if self.pod.run_dir is not None:
            self.pod.save_checkpoint()
        write_text_atomic(self.folder / STATE_FILE, json.dumps({"adoptions": self.adoptions, "hparams": self.hparams()}))

    # -- reports ----------------------------------------------------------------------------------

    def report(self) -> PodReport:
        return self._about(self.pod.report())

    def finish(self) -> PodReport:
        return self._about(self.pod.finish())

    def _about(self, report: PodReport) -> PodReport:
        """The pod's report, and which member sent it, its adoptions, hparams and evaluations."""
        return {**report, Key.MEMBER: self.index, Key.ADOPTIONS: self.adoptions, Key.HPARAMS: self.hparams(),
                Key.EVALS: self.take_events()}

    def close(self) -> None:
        self.pod.close()
        if self.eval_env is not None:
            self.eval_env.close()


STATE_FILE = "member.json"


def member_folder(run_dir: Path | str, index: int) -> Path:
    """Where member `index` of the run in `run_dir` keeps its checkpoints and member.json."""
    return Path(run_dir) / "members" / f"m{index}"


def make_member(config: Any, index: int) -> PodMember:
    """Member `index` of the ensemble of an `ExperimentConfig` (pod=true), writing under
    run_dir/members/m<index>/ (and continuing from there with run.resume=)."""
    from srl.envs.batched import make_batched_env
    from srl.workers.pod import make_pod

    c, e = config, config.pod.ensemble
    folder = member_folder(str(c.run.run_dir), index)
    seed = c.run.seed * 1000 + index  # distinct members, and distinct from other runs' seeds
    pod = make_pod(
        env=c.env, num_envs=c.dataflow.envs_per_actor, sample_length=c.dataflow.sample_length, algo=c.algo_config,
        algorithm=c.algorithm, policy=c.policy, policy_kwargs=c.policy_kwargs, env_kwargs=c.env_kwargs,
        total_env_steps=max(1, c.stop.total_env_steps // e.population), seed=seed,  # each member's schedule
        device=resolve(c.pod.device, index), settings=replace(LearnerSettings.of(c), run_dir=folder),
        cuda_graphs="off",  # an adoption changes hyperparameters a graph would hold as constants
    )
    eval_env = make_batched_env(c.env, e.eval_episodes, device=resolve(c.pod.device, index), **c.env_kwargs) if e.eval_episodes else None
    return PodMember(
        index, pod, eval_env, folder, eval_interval_updates=e.eval_interval_updates,
        eval_seed=c.run.seed + 7919, hparam_names=tuple(e.perturb), resume=c.run.resume is not None,
    )
