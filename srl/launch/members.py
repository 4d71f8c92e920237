"""Handles on ensemble members: where a member runs is all that differs between them.

The population manager (srl.launch.ensemble) talks to every member through the same four verbs:
`send(command)`, `recv_all() -> messages`, `stop() -> final report or None`, `close()`.
Messages and commands are JSON objects (never pickles)::

    member -> manager: {"type": "report" | "eval" | "final" | "error", "member": k, "payload": {...}}
    manager -> member: {"type": "adopt", "checkpoint": path, "hparams": {...}} | {"type": "stop"}

`InlineMember` polls the kernel in the manager's own process (one update per `recv_all`);
`ProcessMember` forks one process per member (the local launcher's placement); `RayMember`
(srl.launch.ray_members) runs each member in a Ray actor. Each handle class also has
`wait(handles, timeout_s)`: block until one of them may have messages.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time
from multiprocessing.connection import Connection
from typing import Any

from srl.config import ExperimentConfig
from srl.launch.shell import error_report

REPORT_INTERVAL_S = 0.5


def _message(kind: str, member: int, payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "member": member, "payload": payload}


class _Reporter:
    """Turns a member kernel's state into messages: eval events at once, reports every interval."""

    def __init__(self, kernel: Any) -> None:
        self.kernel, self.last_report = kernel, time.monotonic()

    def messages(self) -> list[dict[str, Any]]:
        k = self.kernel
        out = [_message("eval", k.index, event) for event in k.take_events()]
        if time.monotonic() - self.last_report >= REPORT_INTERVAL_S:
            out.append(_message("report", k.index, k.report()))
            self.last_report = time.monotonic()
        return out


def apply_command(kernel: Any, command: dict[str, Any]) -> bool:
    """Apply one manager command to a member kernel; True if it says stop."""
    if command["type"] == "adopt":
        kernel.adopt(command["checkpoint"], command["hparams"])
        return False
    if command["type"] == "stop":
        return True
    raise ValueError(f"unknown member command {command['type']!r}")


class InlineMember:
    def __init__(self, kernel: Any) -> None:
        self.kernel, self.index = kernel, kernel.index
        self.reporter = _Reporter(kernel)
        kernel.start()

    @staticmethod
    def wait(handles: list[InlineMember], timeout_s: float) -> None:
        pass  # every recv_all polls the kernel: there is always something to do

    def send(self, command: dict[str, Any]) -> None:
        apply_command(self.kernel, command)

    def recv_all(self) -> list[dict[str, Any]]:
        self.kernel.poll()
        return self.reporter.messages()

    def stop(self) -> dict[str, Any] | None:
        return _message("final", self.index, self.kernel.finish())

    def close(self) -> None:
        self.kernel.close()

    @property
    def exitcode(self) -> int | None:
        return None


def member_loop(kernel: Any, conn: Connection, parent_pid: int) -> None:
    """A member process's loop: commands, one update, messages; until told to stop."""
    def send(message: dict[str, Any]) -> None:
        conn.send_bytes(json.dumps(message).encode())

    reporter = _Reporter(kernel)
    kernel.start()
    while True:
        stopping = False
        while conn.poll():
            stopping = apply_command(kernel, json.loads(conn.recv_bytes())) or stopping
        if stopping:
            break
        kernel.poll()
        for message in reporter.messages():
            send(message)
        if os.getppid() != parent_pid:
            raise RuntimeError("the population manager is gone")
    send(_message("final", kernel.index, kernel.finish()))


def _member_main(config: ExperimentConfig, index: int, conn: Connection, parent_pid: int) -> None:
    import setproctitle
    import torch

    from srl.workers.member import make_member

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the manager's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    setproctitle.setproctitle(f"srl:{config.experiment}:pod:{index}")
    torch.set_num_threads(config.threads_for(trains=True))
    kernel, code = None, 0
    try:
        kernel = make_member(config, index)
        member_loop(kernel, conn, parent_pid)
    except BaseException as e:  # noqa: BLE001  (anything, even SystemExit, is reported to the manager)
        try:
            conn.send_bytes(json.dumps(_message("error", index, error_report(e))).encode())
        except OSError:
            pass
        code = 1
    finally:
        try:
            if kernel is not None:
                kernel.close()
        finally:
            conn.close()
            os._exit(code)  # skip atexit handlers inherited through fork


class ProcessMember:
    def __init__(self, config: ExperimentConfig, index: int) -> None:
        self.index = index
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(
            target=_member_main, args=(config, index, child, os.getpid()), daemon=True
        )
        self.proc.start()
        child.close()

    @staticmethod
    def wait(handles: list[ProcessMember], timeout_s: float) -> None:
        mp.connection.wait([h.conn for h in handles], timeout_s)

    def send(self, command: dict[str, Any]) -> None:
        try:
            self.conn.send_bytes(json.dumps(command).encode())
        except (BrokenPipeError, OSError):
            pass  # it died: the manager sees its exit code

    def recv_all(self) -> list[dict[str, Any]]:
        out = []
        try:
            while self.conn.poll():
                out.append(json.loads(self.conn.recv_bytes()))
        except (EOFError, OSError):
            pass
        return out

    def stop(self, grace_s: float = 10.0) -> dict[str, Any] | None:
        """Ask it to stop; its final report (or an error), or None if it did not answer in time."""
        self.send({"type": "stop"})
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            for message in self.recv_all():
                if message["type"] in ("final", "error"):
                    return message
            if not self.proc.is_alive() and not self.conn.poll():
                return None
            self.conn.poll(0.05)
        return None

    @property
    def exitcode(self) -> int | None:
        return self.proc.exitcode

    def close(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5)
        self.conn.close()
