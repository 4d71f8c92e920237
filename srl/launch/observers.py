"""What the controller's parts beside the monitor see of a run: the observer protocol.

The run monitor (srl.launch.monitor) aggregates the workers' reports and decides the stop; a part
that needs more of a run (an ensemble's population manager, srl.population.ensemble; a self-play
league's keeper, srl.population.keeper) is an observer in the monitor's list, not a field of its own:

    report   -> on_report(ObservedReport)   every worker report, after the monitor counted it
    metrics  -> on_metrics() -> {key: value} each metrics row: the observer's own columns
    commands <- take_commands()              [(pod index, command)], sent by the launcher
    finish   -> on_finish()                  the run ended (any reason): write what is kept

The launchers (inline, local, Ray) call the monitor only; it calls the observers in list order.
An observer reads a report through its role's type (`ObservedReport.as_type`, srl.streams.reports).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from srl.streams.control import Role
from srl.streams.reports import REPORT_TYPES

ReportT = TypeVar("ReportT", bound=Mapping[str, object])


@dataclass(frozen=True)
class ObservedReport:
    role: Role
    index: int
    payload: Mapping[str, Any]  # as it came: `as_type` reads it through its role's type
    policy: str | None  # the worker's policy: its lane's name (srl.graph.lanes; "" a run's one policy), None for the actors
    leads: bool  # it counts updates: a pod, or the trainer that speaks for its group (or policy)
    env_steps: int  # the run's env steps so far, this report's included
    final: bool = False

    def as_type(self, report: type[ReportT]) -> ReportT:
        """The payload as `report`: its role's report type (srl.streams.reports.REPORT_TYPES) or a
        part of it (TrainsReport of a trainer's or pod's). The cast names what was checked: the
        controller's check passed the payload against its role's declared keys and value types
        (srl.launch.reports), an inline run's come from the kernels, typed so. A type that is no
        part of the role's is a reader's mistake, raised."""
        own = REPORT_TYPES.get(self.role)
        if own is None or not set(report.__annotations__) <= set(own.__annotations__):
            raise TypeError(f"a {self.role.title} report read as a {report.__name__}")
        return cast(ReportT, self.payload)


class Observer(Protocol):
    def on_report(self, report: ObservedReport) -> None: ...

    def on_metrics(self) -> dict[str, Any]: ...

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]: ...

    def on_finish(self) -> None: ...
