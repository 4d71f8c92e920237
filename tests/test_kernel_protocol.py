"""Every kernel the builder returns is a `Kernel` (srl.workers.kernel): the launchers call its
methods plainly, so a kernel missing one, or taking other arguments, would fail only at run time,
in a worker process, at the end of a run (`finish`)."""

from __future__ import annotations

import collections.abc
import inspect
import typing

import pytest
import typing_extensions

from srl.api import Worker, register_worker
from srl.config.load import load_config
from srl.graph import build_graph, param_subscribers, with_param_relays
from srl.graph.build import make_kernel
from srl.monitor.timing import TimeBreakdown
from srl.streams.control import Role
from srl.streams.inline import InlineTransport
from srl.workers.kernel import Kernel
from srl.workers.member import PodMember


@register_worker("kernel-test-sink", inputs=("samples",))
class Sink(Worker):
    """A worker of the user's own kind (srl.api.worker): a Kernel through its base class."""

    def __init__(self, inputs, outputs, run_dir, index) -> None:  # no super().__init__: still a Kernel
        self.inputs = inputs

    def poll(self) -> bool:
        return False


SMALL = ["launch.num_actor_workers=1", "dataflow.envs_per_actor=2", "dataflow.ring_splits=1", "monitor.display=off"]
# together these place a worker of every role: the test checks that they do
EXPERIMENTS = {
    "cartpole-ppo": [*SMALL, "dataflow.inference=policy_worker", "launch.num_policy_workers=1", "eval.episodes=1",
                     "extra_workers=[{kind: kernel-test-sink, count: 1}]"],
    "cartpole-dqn": SMALL,  # replay: a buffer worker and the replay trainer
    "cartpole-pod": ["dataflow.envs_per_actor=8", "monitor.display=off"],
}
METHODS = [name for name, value in vars(Kernel).items() if inspect.isfunction(value) and not name.startswith("_")]


def built_kernels(tmp_path):
    """(role, kernel) for every worker of EXPERIMENTS, each built as the inline launcher builds it;
    cartpole-ppo's parameter subscribers behind a relay, as a launcher across hosts places one."""
    for experiment, overrides in EXPERIMENTS.items():
        graph = build_graph(load_config(experiment, [*overrides, f"run.run_dir={tmp_path / experiment}"]))
        if experiment == "cartpole-ppo":
            graph = with_param_relays(graph, [param_subscribers(graph)])
        transport = InlineTransport()
        kernels = []
        try:
            for spec in graph.workers:
                kernels.append(make_kernel(graph, spec, transport))
                yield spec.role, kernels[-1]
        finally:
            for kernel in kernels:
                kernel.close()


def check_conforms(kernel: object) -> None:
    assert isinstance(kernel, Kernel), f"{type(kernel).__name__} lacks a Kernel member"
    assert isinstance(kernel.clock, TimeBreakdown) and isinstance(kernel.receivers, list)
    for name in METHODS:
        want, got = inspect.signature(getattr(Kernel, name)), inspect.signature(getattr(type(kernel), name))
        assert [(p.name, p.kind) for p in got.parameters.values()][: len(want.parameters)] == [
            (p.name, p.kind) for p in want.parameters.values()
        ], f"{type(kernel).__name__}.{name}{got}: the contract is {name}{want}"
        extra = list(got.parameters.values())[len(want.parameters):]
        assert all(p.default is not p.empty for p in extra), f"{type(kernel).__name__}.{name}{got}: required extras"
        want_return = typing.get_type_hints(getattr(Kernel, name))["return"]
        got_return = typing.get_type_hints(getattr(type(kernel), name))["return"]
        assert _returns(got_return, want_return), f"{type(kernel).__name__}.{name} returns {got_return}"


def _returns(got: object, want: object) -> bool:
    """Whether `got` is the contract's return type: itself (NoneType, bool), or for a report a
    Mapping, a dict or the role's TypedDict (srl.streams.reports)."""
    if isinstance(got, typing.TypeVar):  # a generic kernel's (Learner[ReportT]): what it is bound to
        got = got.__bound__
    if _bare(want) is collections.abc.Mapping:
        return typing_extensions.is_typeddict(got) or _bare(got) in (collections.abc.Mapping, dict)
    return _bare(got) is _bare(want)


def _bare(annotation: object) -> object:
    """dict[str, Any] -> dict; NoneType and bool as they are."""
    return typing.get_origin(annotation) or annotation


def test_every_kernel_the_builder_returns_is_a_kernel(tmp_path):
    assert {"start", "poll", "report", "finish", "close"} <= set(METHODS)  # the check reads the protocol
    classes: dict[Role, set[str]] = {}
    for role, kernel in built_kernels(tmp_path):
        check_conforms(kernel)
        classes.setdefault(role, set()).add(type(kernel).__name__)
    assert set(classes) == set(Role), f"no experiment above places {set(Role) - set(classes)}"
    assert classes[Role.TRAINER] == {"TrainerKernel", "ReplayTrainerKernel"}


def test_an_ensemble_member_is_a_kernel(tmp_path):
    config = load_config("cartpole-pod-ensemble", [f"run.run_dir={tmp_path}", "monitor.display=off", "dataflow.envs_per_actor=8",
                                                    "pod.ensemble.population=2", "pod.ensemble.eval_episodes=2"])
    graph = build_graph(config)
    member = make_kernel(graph, graph.workers[1], InlineTransport())  # pod:1, as every launcher builds it
    try:
        assert isinstance(member, PodMember) and member.index == 1
        check_conforms(member)
    finally:
        member.close()


class _NoFinish:
    clock = TimeBreakdown()
    receivers: list = []

    def start(self) -> None: ...

    def poll(self) -> bool:
        return False

    def report(self) -> dict:
        return {}

    def close(self) -> None: ...


class _PollTakesAnArgument(_NoFinish):
    def finish(self) -> dict:
        return {}

    def poll(self, budget) -> bool:  # type: ignore[override]  # the mismatch this test wants found
        return False


@pytest.mark.parametrize("kernel", [_NoFinish(), _PollTakesAnArgument()], ids=["no finish", "poll(budget)"])
def test_the_check_finds_a_kernel_that_does_not_conform(kernel):
    with pytest.raises(AssertionError):
        check_conforms(kernel)
