"""Ensemble members as Ray actors: the fourth placement behind the members' four verbs.

    manager (driver)                                  MemberActor (a Ray worker process)
    send(adopt) ------ queued, delivered with --->    work(commands, BURST_S):
    recv_all()  <----- the previous call's ------      apply commands; poll the pod for BURST_S;
                       messages; next call sent          eval events + reports (srl.launch.members)
    stop()      ------ finish() --------------->      final report

Each member keeps exactly one `work` call in flight: when its messages arrive, the next call
leaves at once with the commands queued since, so a member idles only for one round trip per
burst, and an adopt reaches it within a burst. The actor builds its kernel inside a call and
returns any exception as an "error" message with its traceback (the manager raises it as a
failed member); an actor that dies (killed, out of memory) reads as exit code -9; one whose request
Ray cannot grant for ray_placement_timeout_s ends the run (srl.launch.ray_placement). Members share
the run directory with the manager (checkpoints, adopt copies), so a member placed on another
host fails at once, as the Ray launcher's workers do.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from srl.config import ExperimentConfig
from srl.launch.members import _message, _Reporter, apply_command
from srl.launch.ray_launcher import _ray, _set_title, actor_options
from srl.launch.ray_placement import Placement, report_unplaced, resources_of
from srl.launch.shell import error_report
from srl.streams.control import Role

BURST_S = 0.2  # seconds of polling per call: long enough that round trips cost little


class MemberActor:
    """The Ray actor class (made remote in RayMember): one ensemble member for its whole life."""

    def __init__(self, config: ExperimentConfig, index: int, controller_host: str) -> None:
        self.config, self.index, self.controller_host = config, index, controller_host
        self.kernel: Any = None
        self.reporter: _Reporter | None = None

    def where(self) -> dict[str, Any]:
        ray = _ray()
        return {"node_id": ray.get_runtime_context().get_node_id(), "host": ray.util.get_node_ip_address(),
                "pid": os.getpid()}

    def _build(self) -> None:
        import torch

        import srl.builtins  # noqa: F401  (a Ray worker is a fresh process: register the built-ins)
        from srl.config import import_modules
        from srl.workers.member import make_member

        host = _ray().util.get_node_ip_address()
        if host != self.controller_host:
            raise RuntimeError(
                f"member {self.index} was placed on host {host}, the manager runs on {self.controller_host}: "
                "ensemble members share the run directory, so they must run on the manager's host"
            )
        import_modules(self.config.modules)
        _set_title(f"srl:{self.config.experiment}:pod:{self.index}")
        torch.set_num_threads(self.config.threads_for(trains=True))
        self.kernel = make_member(self.config, self.index)
        self.reporter = _Reporter(self.kernel)
        self.kernel.start()

    def work(self, commands: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
        """Apply the commands, poll for `seconds`; the messages (JSON text, never pickles)."""
        try:
            if self.kernel is None:
                self._build()
            for command in commands:
                apply_command(self.kernel, command)
            out: list[dict[str, Any]] = []
            deadline = time.monotonic() + seconds
            reporter = self.reporter
            assert reporter is not None  # _build made it with the kernel
            while True:
                self.kernel.poll()
                out += reporter.messages()
                if time.monotonic() >= deadline:
                    return out
        except BaseException as e:  # noqa: BLE001  (anything is reported to the manager)
            return [_message("error", self.index, error_report(e))]

    def finish(self) -> dict[str, Any] | None:
        if self.kernel is None:
            return None
        try:
            return _message("final", self.index, self.kernel.finish())
        finally:
            self.kernel.close()
            self.kernel = None


class RayMember:
    """Handle on one member running in a Ray actor (same verbs as srl.launch.members' handles)."""

    def __init__(self, config: ExperimentConfig, index: int) -> None:
        self.ray = _ray()
        self.index = index
        remote = self.ray.remote(MemberActor).options(**actor_options(config, Role.POD))
        self.actor = remote.remote(config, index, self.ray.util.get_node_ip_address())
        self.placement = Placement(
            self.ray, self.actor.where.remote(), resources_of(config, Role.POD), "ray_resources.pod",
            config.launch.ray_placement_timeout_s,
        )  # fmt: skip
        self.outbox: list[dict[str, Any]] = []
        self.pending = self.actor.work.remote([], BURST_S)
        self._exitcode: int | None = None

    def unplaced(self) -> bool:
        """Ray has not placed it yet, within ray_placement_timeout_s (WorkerFailed past it, unmet)."""
        return self._exitcode is None and self.placement.watch(f"pod:{self.index}")

    @staticmethod
    def wait(handles: list[RayMember], timeout_s: float) -> None:
        """Block until some member's call has returned, or `timeout_s`."""
        refs = [h.pending for h in handles if h.pending is not None]
        if refs:
            handles[0].ray.wait(refs, num_returns=1, timeout=timeout_s)

    def send(self, command: dict[str, Any]) -> None:
        self.outbox.append(json.loads(json.dumps(command)))  # the same JSON contract as a pipe

    def recv_all(self) -> list[dict[str, Any]]:
        if self.pending is None:
            return []
        ready, _ = self.ray.wait([self.pending], timeout=0)
        if not ready:
            return []
        try:
            messages = self.ray.get(ready[0])
        except self.ray.exceptions.RayActorError:  # the process died (killed, out of memory)
            self.pending, self._exitcode = None, -9
            return []
        commands, self.outbox = self.outbox, []
        self.pending = self.actor.work.remote(commands, BURST_S)
        return messages

    def stop(self, grace_s: float = 10.0) -> dict[str, Any] | None:
        """Its final report, or None if it is gone or did not answer in time."""
        if self._exitcode is not None:
            return None
        try:
            return self.ray.get(self.actor.finish.remote(), timeout=grace_s)  # after the call in flight
        except Exception:  # noqa: BLE001  (dead or too slow: the manager just has no final report)
            return None

    @property
    def exitcode(self) -> int | None:
        return self._exitcode

    def close(self) -> None:
        self.ray.kill(self.actor, no_restart=True)


def write_placement(run_dir: Path, handles: list[RayMember]) -> None:
    """run_dir/placement.json: the Ray node and host of each member, as the Ray launcher writes it."""
    where = {f"pod:{h.index}": h.placement.where() for h in handles}
    if where:
        (run_dir / "placement.json").write_text(json.dumps(where, indent=2, sort_keys=True) + "\n")
    report_unplaced({f"pod:{h.index}": h.placement for h in handles})
