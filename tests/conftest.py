"""Shared fixtures: every test must leave no srl worker process and no shared memory behind."""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch
from skip_guard import pytest_collection_modifyitems as skip_without_cuda
from skip_guard import (  # noqa: F401  (hooks: only missing hardware may skip a test)
    pytest_make_collect_report,
    pytest_runtest_makereport,
)

import srl.testing  # noqa: F401  (registers the counting envs; worker processes fork from here and inherit them)
from srl import devices
from srl.config import RUN_ID_PREFIX_ENV


def srl_processes(since_s: float = 0.0) -> list[psutil.Process]:
    """srl workers started by this test: our descendants, or orphans born since `since_s`
    (a worker whose controller died is re-parented). Other runs on the machine are not ours."""
    mine = {p.pid for p in psutil.Process().children(recursive=True)}
    out = []
    for proc in psutil.process_iter(["cmdline", "ppid", "create_time"]):
        cmdline = proc.info["cmdline"] or []
        if not (cmdline and cmdline[0].startswith("srl:")):
            continue
        orphan = proc.info["ppid"] == 1 and proc.info["create_time"] >= since_s
        if proc.pid in mine or (orphan and _same_test_process(proc)):
            out.append(proc)
    return out


# pytest-xdist runs the suite in several processes (.ci/run: two). Each names itself in
# PYTEST_XDIST_WORKER before anything starts, so every worker its tests fork or exec carries the
# name in /proc/<pid>/environ; an orphan of the other test process is not this one's to report.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def _same_test_process(proc: psutil.Process) -> bool:
    try:
        return proc.environ().get("PYTEST_XDIST_WORKER") == XDIST_WORKER
    except (psutil.AccessDenied, psutil.NoSuchProcess, OSError):
        return XDIST_WORKER is None


# Runs started by this test session name their blocks with this prefix, so another srl run on
# the machine at the same time cannot trip the leak check. Set in the environment, as the default
# of every run's debug.run_id_prefix (srl.config.DebugConfig): runs in `srl run` processes too.
SESSION_PREFIX = f"t{os.getpid()}x"


def srl_shm() -> list[str]:
    return sorted(p.name for p in Path("/dev/shm").glob(f"srl_{SESSION_PREFIX}*"))


@pytest.fixture(autouse=True)
def no_leaks():
    shm_before = set(srl_shm())
    started_s = time.time() - 1
    yield
    deadline = time.monotonic() + 10
    while srl_processes(started_s) and time.monotonic() < deadline:
        time.sleep(0.1)
    leaked = [(p.pid, p.info["cmdline"][0]) for p in srl_processes(started_s)]
    for p in srl_processes(started_s):
        p.kill()
    assert not leaked, f"worker processes left running: {leaked}"
    new_shm = set(srl_shm()) - shm_before
    assert not new_shm, f"shared memory left behind: {sorted(new_shm)}"


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Every test starts with torch on one thread, as srl's workers act, whatever the test before
    it left (an inline run, `train_pod(torch_threads=...)` set their own): initial weights depend on
    the thread count (orthogonal init), and at one thread per core torch spins on these small ops."""
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def no_cuda_outside_gpu_tests(request, monkeypatch):
    """A test not marked gpu sees no CUDA device, on any machine: `auto` means the CPU for it, as on
    CI. On a GPU machine it would otherwise put trainers on CUDA, and once a gpu test or an inline
    run has initialised CUDA in this process, every later local launch (forked workers) would be
    refused (srl.config.checks). Runs a test starts as new processes (`srl run`) see the machine as it is."""
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setattr(devices, "cuda_count", lambda: 0)


@pytest.fixture
def params_clock(monkeypatch):
    """A hand-driven clock for srl.streams.params (its WANT timing): set `params_clock.now`."""
    from types import SimpleNamespace

    from srl.streams import params as params_module

    fake = SimpleNamespace(now=100.0)
    fake.monotonic = lambda: fake.now
    monkeypatch.setattr(params_module, "time", fake)
    return fake


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "run"


@pytest.fixture
def beside_the_wire(monkeypatch):
    """`with beside_the_wire(send) as threads:` a local run over tcp started inside calls
    `send(wire, stop)` on a thread of the test as soon as it has made its wire (ports and secret),
    before any worker starts; on leaving, `stop` is set and the threads joined. `threads` stays
    empty where the run made no wire."""
    from srl.launch import local as local_launcher

    make = local_launcher._tcp_wire

    @contextlib.contextmanager
    def beside(send):
        stop, threads = threading.Event(), []

        def wire_and_send(graph):
            wire = make(graph)
            threads.append(threading.Thread(target=send, args=(wire, stop), daemon=True))
            threads[-1].start()
            return wire

        monkeypatch.setattr(local_launcher, "_tcp_wire", wire_and_send)
        try:
            yield threads
        finally:
            stop.set()
            for thread in threads:
                thread.join(10)

    return beside


# Tests that start Ray (ray.init, `ray start`, launcher=ray) or namespace hosts run one at a time on
# one xdist process (`--dist loadgroup`): `ray.init()` joins a cluster that `ray start` announced in
# /tmp/ray, and the namespace hosts share one subnet allocator; the other process runs the rest.
CLUSTER_SOURCE = re.compile(r"\bray\b|srl\.testing\.hosts|ray_hosts")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_without_cuda(config, items)
    cluster_files: dict[Path, bool] = {}
    for item in items:
        path = Path(item.fspath)
        if path not in cluster_files:
            cluster_files[path] = bool(CLUSTER_SOURCE.search(path.read_text()))
        if cluster_files[path]:
            item.add_marker(pytest.mark.xdist_group("cluster"))


def pytest_configure(config):
    # In-process torch work (kernel tests, inline runs) on one thread, as srl's workers act: at
    # torch's default of one per core its threads spin on these small ops (the QMIX matrix-game
    # test: 23.7 s of CPU with 2 threads, 7.2 s with 1, 2 cores at load average 10-16).
    torch.set_num_threads(1)
    os.environ.setdefault("SRL_IPC_DIR", "/tmp")
    os.environ[RUN_ID_PREFIX_ENV] = SESSION_PREFIX
