"""What the controller's parts beside the monitor see of a run: the observer protocol.

The run monitor (srl.launch.monitor) aggregates the workers' reports and decides the stop; a part
that needs more of a run (an ensemble's population manager, srl.population.ensemble; a self-play
league's keeper, srl.population.keeper) is an observer in the monitor's list, not a field of its own:

    report   -> on_report(ObservedReport)   every worker report, after the monitor counted it
    metrics  -> on_metrics() -> {key: value} each metrics row: the observer's own columns
    commands <- take_commands()              [(pod index, command)], sent by the launcher
    finish   -> on_finish()                  the run ended (any reason): write what is kept

The launchers (inline, local, Ray) call the monitor only; it calls the observers in list order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from srl.streams.control import Role


@dataclass(frozen=True)
class ObservedReport:
    role: Role
    index: int
    payload: dict[str, Any]
    policy: str | None  # the worker's policy: its lane's name (srl.graph.lanes; "" a run's one policy), None for the actors
    leads: bool  # it counts updates: a pod, or the trainer that speaks for its group (or policy)
    env_steps: int  # the run's env steps so far, this report's included
    final: bool = False


class Observer(Protocol):
    def on_report(self, report: ObservedReport) -> None: ...

    def on_metrics(self) -> dict[str, Any]: ...

    def take_commands(self) -> list[tuple[int, dict[str, Any]]]: ...

    def on_finish(self) -> None: ...
