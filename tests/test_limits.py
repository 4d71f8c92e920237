"""Nothing forged is accepted, nothing good is lost: bounds checked before launch, disk faults that
end a run cleanly, and every loss a restart causes counted in metrics and summary."""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import psutil
import pytest
import torch
from test_faults import kill_now
from test_shutdown import spawn, srl_command, wait_for_metrics

from srl import checkpoint, cli, storage
from srl.config import ConfigError
from srl.config.load import load_config
from srl.graph import build_graph, machine
from srl.launch import memory as memory_module
from srl.launch import monitor as monitor_module
from srl.launch.memory import MemoryWatch
from srl.launch.monitor import RunMonitor
from srl.launch.run import run_experiment
from srl.streams.control import Role
from srl.streams.incarnations import Incarnations
from srl.streams.inline import InlineTransport
from srl.streams.listeners import connection_cap
from srl.streams.local import IPC_PREFIX, make_ipc_dir, remove_dead_ipc_dirs
from srl.streams.samples import SampleConsumer, SampleProducer

QUICK = ["monitor.display=off", "monitor.learning_curve=false", "stop.target_return=null"]


def tmp_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.rglob(f"*{storage.TMP_SUFFIX}"))


# ------------------------------------------------------------------ bounds, before any process starts


@pytest.mark.parametrize(
    "override, field, limit",
    [
        ("run.seed=4294967296", "run.seed", "4294967295"),
        ("run.seed=-1", "run.seed", "greater than or equal to 0"),
        ("launch.num_actor_workers=100000", "launch.num_actor_workers", "4096"),
        ("dataflow.segment_slots=1000000", "dataflow.segment_slots", "64"),
        ("dataflow.sample_length=100000000", "dataflow.sample_length", "100000"),
        ("dataflow.envs_per_actor=1000000", "dataflow.envs_per_actor", "65536"),
        ("launch.heartbeat_timeout_s=0.01", "launch.heartbeat_timeout_s", "greater than or equal to 1"),
        ("launch.torch_threads=100000", "launch.torch_threads", "1024"),
        ("stop.total_env_steps=100000000000000000000000", "stop.total_env_steps", "9007199254740992"),
        ("stop.target_return=nan", "stop.target_return", "finite number"),
        ("stop.target_return=.inf", "stop.target_return", "finite number"),
        ("stop.time_limit_s=.inf", "stop.time_limit_s", "finite number"),
        ("algo.lr=nan", "algo.lr", "finite number"),
        ("launch.worker_memory_limit_mib=0", "launch.worker_memory_limit_mib", "greater than or equal to 1"),
    ],
)
def test_a_value_past_its_bound_is_refused_naming_the_field_and_the_limit(override, field, limit):
    with pytest.raises(ConfigError) as error:
        load_config("cartpole-ppo", [override])
    assert f"field '{field}'" in str(error.value) and limit in str(error.value), str(error.value)


def test_replay_floats_refuse_nan_too():
    with pytest.raises(ConfigError, match=r"field 'replay.alpha'.*finite number"):
        load_config("cartpole-dqn", ["replay.alpha=nan"])


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["run", "cartpole-ppo", *args])
    return code, capsys.readouterr().err


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(machine, "cpu_count", lambda: 2)


def test_more_workers_than_the_machine_holds_are_refused_before_anything_starts(capsys, run_dir, two_cpus):
    code, err = run_cli(capsys, "launch.num_actor_workers=100", f"run.run_dir={run_dir}", *QUICK)
    assert code == 2, err
    assert "launch.num_actor_workers=100" in err and "102 worker processes exceed 64" in err and "2 CPUs" in err, err
    assert not run_dir.exists(), "refused before the run directory is made"


def test_more_torch_threads_than_a_multiple_of_the_cpus_are_refused(capsys, run_dir, two_cpus):
    code, err = run_cli(capsys, "launch.trainer_torch_threads=9", f"run.run_dir={run_dir}", *QUICK)
    assert code == 2 and "field 'launch.trainer_torch_threads': 9" in err and "exceed 8" in err, err


def test_workers_past_the_open_files_limit_are_refused_naming_it(capsys, run_dir, monkeypatch):
    monkeypatch.setattr(machine.resource, "getrlimit", lambda _: (256, 256))
    code, err = run_cli(capsys, "launch.num_actor_workers=20", f"run.run_dir={run_dir}", *QUICK)
    assert code == 2 and "RLIMIT_NOFILE" in err and "limit of 256" in err and "launch.num_actor_workers=20" in err, err


def test_the_soft_open_files_limit_is_raised_to_what_the_run_needs(monkeypatch):
    graph = machine.Graph.__new__(machine.Graph)  # only its workers and streams matter here
    graph.workers, graph.streams = [None] * 40, []  # type: ignore[list-item]
    graph.config = load_config("cartpole-ppo")
    set_to = []
    monkeypatch.setattr(machine.resource, "getrlimit", lambda _: (256, 4096))
    monkeypatch.setattr(machine.resource, "setrlimit", lambda _, limits: set_to.append(limits))
    machine.raise_open_files_limit(graph)
    assert set_to == [(machine.files_needed(graph), 4096)] and machine.files_needed(graph) > 256


def test_the_open_files_a_run_needs_hold_what_strangers_can_connect_to_its_listeners():
    """tcp: the controller's two listeners (controller.in, control.out) each let strangers hold
    their cap past the workers' own connections; on shm only the trainers' rendezvous listens."""
    shm = build_graph(load_config("cartpole-ppo"))
    tcp = build_graph(load_config("cartpole-ppo", ["dataflow.transport=tcp"]))
    workers = len(tcp.workers)
    assert machine.files_needed(shm) == machine.FILES_BASE + machine.FILES_PER_WORKER * workers
    assert machine.files_needed(tcp) - machine.files_needed(shm) == 2 * (connection_cap(workers) - workers)
    two = build_graph(load_config("cartpole-ppo", ["launch.num_trainers=2", "launch.num_actor_workers=2"]))
    assert machine.listener_room(two) == connection_cap(2) - 2


def test_slots_past_the_free_shared_memory_are_refused(capsys, run_dir, monkeypatch):
    monkeypatch.setattr(machine.shutil, "disk_usage", lambda _: SimpleNamespace(free=2**20))
    code, err = run_cli(capsys, "dataflow.segment_slots=64", f"run.run_dir={run_dir}", *QUICK)
    assert code == 2 and "shared memory" in err and "/dev/shm has 0.00 GiB free" in err, err
    assert "dataflow.segment_slots=64" in err and "lower segment_slots" in err, err


def test_arrays_past_the_available_memory_are_refused(capsys, run_dir, monkeypatch):
    monkeypatch.setattr(machine.psutil, "virtual_memory", lambda: SimpleNamespace(available=2**14, total=2**30))
    code, err = run_cli(capsys, f"run.run_dir={run_dir}", "launch.launcher=inline", *QUICK)
    assert code == 2 and "memory: the run's arrays need" in err and "available" in err, err


def test_a_worker_past_the_memory_limit_is_named_once_and_ends_the_run_only_when_the_limit_is_set(capsys, monkeypatch):
    watch = MemoryWatch(limit_mib=1)  # this test process holds far more than 1 MiB of its own
    watch.check(lambda: {"actor:3": os.getpid()})
    name, why = watch.failed
    assert name == "actor:3" and f"actor:3 (pid {os.getpid()}) has an RSS of" in why, why
    assert "launch.worker_memory_limit_mib=1" in why
    monkeypatch.setattr(memory_module.psutil, "virtual_memory", lambda: SimpleNamespace(total=2 * 2**20))
    warn_only = MemoryWatch(limit_mib=None)  # half of a 2 MiB machine
    for _ in range(2):
        warn_only._last_s = 0.0
        warn_only.check(lambda: {"trainer:0": os.getpid()})
    err = capsys.readouterr().err
    assert warn_only.failed is None and err.count("srl: warning: trainer:0 (pid") == 1, err
    assert "half of the machine's memory" in err


def test_a_leaking_actor_ends_the_run_naming_it_and_its_memory(run_dir, capsys):
    # workers fork from this process: late in a whole suite it is large, and a worker that touches
    # its inherited pages (refcounts) makes them its own, so the limit sits above this process's size
    limit_mib = max(400, round(psutil.Process().memory_info().rss / 2**20) + 300)
    config = load_config("cartpole-ppo", [
        f"run.run_dir={run_dir}", "modules=leaky_env", "env=leaky", "env_kwargs.kib_per_step=16", "algorithm=none",
        "policy=random", "dataflow.envs_per_actor=2", "stop.total_env_steps=100000000", f"launch.worker_memory_limit_mib={limit_mib}",
        *QUICK,
    ])  # fmt: skip
    assert run_experiment(config) == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "worker failed", summary
    assert "worker actor:0 failed" in summary["error"], summary
    assert f"launch.worker_memory_limit_mib={limit_mib}" in summary["error"], summary
    assert summary["restarts"] == {}, "no restart: the run ends"


# ------------------------------------------------------------------ disk faults


class FullDisk:
    """A file that takes `writes` writes, then fails each as a full disk does."""

    def __init__(self, file, writes: int) -> None:
        self.file, self.left = file, writes

    def write(self, data) -> int:
        if self.left <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.left -= 1
        return self.file.write(data)

    def __getattr__(self, name):
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()


def test_atomic_file_leaves_the_old_file_whole_and_no_tmp_when_a_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    storage.write_text_atomic(path, "good")
    monkeypatch.setattr(storage, "open", lambda p, mode: FullDisk(open(p, mode), writes=3), raising=False)  # noqa: SIM115
    # torch turns the OSError into a RuntimeError
    with pytest.raises(storage.WriteFailed) as error, storage.atomic_file(path) as f:
        torch.save({"w": torch.zeros(1000), "b": torch.ones(10)}, f)
    assert str(error.value) == f"cannot write {path}: ENOSPC, errno 28: No space left on device"
    assert error.value.errno == errno.ENOSPC
    with pytest.raises(storage.WriteFailed, match="ENOSPC"), storage.atomic_file(path) as f:
        np.savez(f, a=np.zeros(100000))
    monkeypatch.undo()
    with pytest.raises(storage.WriteFailed, match="EIO, errno 5: Input/output error"), storage.atomic_file(path) as f:
        f.write(b"x")
        raise OSError(errno.EIO, "Input/output error")
    assert path.read_text() == "good" and tmp_files(tmp_path) == []


def fill_metrics_after(monkeypatch, rows: int) -> None:
    """metrics.jsonl takes `rows` rows, then its disk is full."""
    import srl.monitor.recorder as recorder

    monkeypatch.setattr(recorder, "open", lambda path, *a, **k: FullDisk(open(path, *a, **k), rows), raising=False)  # noqa: SIM115


def assert_ended_by(run_dir: Path, err: str, path: str, code: str) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "write failed", summary
    assert path in summary["error"] and code in summary["error"], summary
    assert err.count(summary["error"]) == 1, err  # one message, said once
    assert "Traceback" not in err, err
    assert tmp_files(run_dir) == [], tmp_files(run_dir)
    return summary


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_a_full_disk_under_metrics_ends_the_run_with_one_message_and_a_summary(run_dir, capsys, monkeypatch, launcher):
    fill_metrics_after(monkeypatch, rows=3)
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", f"launch.launcher={launcher}", "run.checkpoint_interval_s=0.3",
                                          "monitor.log_interval_s=0.5", "stop.total_env_steps=5000000", *QUICK])  # fmt: skip
    assert run_experiment(config) == 1
    err = capsys.readouterr().err
    assert_ended_by(run_dir, err, str(run_dir / "metrics.jsonl"), "ENOSPC")
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 3
    saved = checkpoint.load_latest(run_dir)
    assert saved is not None and saved["version"] > 0, "the last good checkpoint loads"


def test_a_failing_tensorboard_writer_ends_the_run_naming_its_directory(run_dir, capsys, monkeypatch):
    from tensorboard.summary.writer import record_writer

    real, records = record_writer.RecordWriter.write, [0]

    def write(self, data):  # runs in TensorBoard's writer thread
        records[0] += 1
        if records[0] > 40:
            raise OSError(errno.EIO, "Input/output error")
        return real(self, data)

    monkeypatch.setattr(record_writer.RecordWriter, "write", write)
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", "launch.launcher=inline", "stop.total_env_steps=5000000",
                                          *QUICK])  # fmt: skip
    assert run_experiment(config) == 1
    assert_ended_by(run_dir, capsys.readouterr().err, str(run_dir / "tb"), "EIO")


def test_a_checkpoint_that_cannot_be_written_ends_the_run_without_restarts(run_dir, capsys, monkeypatch):
    """The trainer (a forked process) fails its third save half-way: no restart, no .tmp, and the
    second checkpoint is still the latest and loads."""
    real, saves = torch.save, [0]

    def save(obj, f, *args, **kwargs):
        saves[0] += 1
        if saves[0] >= 3:
            f.write(b"half a checkpoint" * 100)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", "launch.launcher=local", "run.checkpoint_interval_s=0.3",
                                          "stop.total_env_steps=5000000", "launch.max_restarts=3", *QUICK])  # fmt: skip
    assert run_experiment(config) == 1
    summary = assert_ended_by(run_dir, capsys.readouterr().err, str(run_dir / "checkpoints" / "ckpt-"), "ENOSPC")
    assert summary["restarts"] == {}, "a full disk stays full: no restart"
    kept = sorted(p.name for p in (run_dir / "checkpoints").glob("ckpt-*"))
    latest = checkpoint.latest_meta(run_dir)
    assert len(kept) == 2 and latest["path"] == kept[-1], (kept, latest)
    assert checkpoint.load_latest(run_dir)["version"] == latest["version"]


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_a_final_checkpoint_that_cannot_be_written_fails_the_run(run_dir, capsys, monkeypatch, launcher):
    def save(obj, f, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(torch, "save", save)
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", f"launch.launcher={launcher}", "stop.total_env_steps=3000",
                                          "run.checkpoint_interval_s=3600", *QUICK])  # fmt: skip
    assert run_experiment(config) == 1, "the run reached its end, but its last state is not saved"
    assert_ended_by(run_dir, capsys.readouterr().err, str(run_dir / "checkpoints" / "ckpt-"), "EROFS")
    assert checkpoint.latest_meta(run_dir) is None and list((run_dir / "checkpoints").iterdir()) == []


def test_a_config_that_cannot_be_written_stops_the_run_before_it_starts(run_dir, capsys, monkeypatch):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage.os, "fsync", full)
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", *QUICK])
    assert run_experiment(config) == 1
    err = capsys.readouterr().err
    assert err.count(f"srl: cannot write {run_dir / 'config.yaml'}: ENOSPC") == 1, err
    # the launch made the directory, and leaves none: no config.yaml, whole or torn, no .tmp, no run.lock
    assert not run_dir.exists(), sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("cartpole-ppo", [f"run.resume={run_dir}"])
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("")  # what an srl before atomic writes left on a full disk
    with pytest.raises(ConfigError, match="not a config"):
        load_config("cartpole-ppo", [f"run.resume={run_dir}"])


class FullDiskOs:
    """The os module as srl.launch.rundir sees it on a full disk: making a file works (an inode),
    writing data into it does not."""

    def __getattr__(self, name):
        return getattr(os, name)

    @staticmethod
    def write(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    @staticmethod
    def pwrite(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("found", ["nothing", "an empty directory", "a run to resume"])
def test_a_disk_full_at_start_is_one_line_exit_1_and_leaves_the_directory_as_it_was(run_dir, capsys, monkeypatch, found):
    """It was a traceback (OSError from run.lock's write) and an empty run.lock left behind."""
    import srl.launch.rundir as rundir

    record = '{"run_id": "r1", "launch": 1, "pid": 1, "host": "h", "started_unix_s": 1.0}\n'
    resume = []
    if found != "nothing":
        run_dir.mkdir()
    if found == "a run to resume":
        load_config("cartpole-ppo", [f"run.run_dir={run_dir}"]).dump_yaml(run_dir / "config.yaml")
        (run_dir / "run.lock").write_text(record)
        resume = [f"run.resume={run_dir}"]
    monkeypatch.setattr(rundir, "os", FullDiskOs())
    code = cli.main(["run", "cartpole-ppo", f"run.run_dir={run_dir}", *resume, *QUICK])
    assert code == 1
    assert capsys.readouterr().err == f"srl: cannot write {run_dir / 'run.lock'}: ENOSPC, errno 28: No space left on device\n"
    if found == "nothing":
        assert not run_dir.exists(), "a directory the launch made is gone"
    elif found == "an empty directory":
        assert list(run_dir.iterdir()) == [], "no run.lock, empty or not"
    else:
        assert (run_dir / "run.lock").read_text() == record, "the last launch's record stays whole"


def test_an_ensemble_s_first_leaderboard_that_cannot_be_written_is_one_line_exit_1(run_dir, capsys, monkeypatch):
    """The controller's own files at start (the tournament's leaderboard, a league's table) as config.yaml."""
    from srl.population import leaderboard, pool

    def full(path, text):
        raise storage.WriteFailed(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(pool, "write_text_atomic", full)  # the one writer of a pool's table (json)
    config = load_config("cartpole-pod-ensemble", [f"run.run_dir={run_dir}", "pod.ensemble.population=2", *QUICK])
    assert run_experiment(config) == 1
    assert capsys.readouterr().err == f"srl: cannot write {run_dir / leaderboard.JSON_NAME}: ENOSPC, errno 28: No space left on device\n"


def test_a_summary_that_cannot_be_written_is_said_once(run_dir, capsys, monkeypatch):
    import srl.launch.outputs as outputs

    real = outputs.write_text_atomic

    def write(path, text):
        if Path(path).name == "summary.json":
            raise storage.WriteFailed(errno.ENOSPC, "No space left on device", str(path))
        return real(path, text)

    monkeypatch.setattr(outputs, "write_text_atomic", write)
    config = load_config("cartpole-ppo", [f"run.run_dir={run_dir}", "launch.launcher=inline", "stop.total_env_steps=2000", *QUICK])
    assert run_experiment(config) == 0  # the run itself went well
    err = capsys.readouterr().err
    assert err.count(f"srl: cannot write {run_dir / 'summary.json'}: ENOSPC") == 1, err
    assert not (run_dir / "summary.json").exists() and (run_dir / "time_breakdown.json").exists()


# ------------------------------------------------------------------ losses counted


def test_the_monitor_counts_a_dead_trainer_s_updates_and_segments_and_a_dead_actor_s_steps(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(monitor_module, "time", SimpleNamespace(monotonic=lambda: clock[0], time=time.time))
    m = RunMonitor(load_config("cartpole-ppo", QUICK))
    trainer = {"updates": 4, "segments_dropped": 1, "segments_pending": 2, "segments_lost": 0}
    actor = {"env_steps": 500, "episode_returns": [], "episode_lengths": []}
    for version in (4, 8, 12):  # reports every 0.5 s: 4 updates, 500 steps each
        clock[0] += 0.5
        m.on_report(Role.TRAINER, 0, {**trainer, "policy_version": version})
        m.on_report(Role.ACTOR, 0, {**actor, "segments_lost": 0})
    assert (m.updates, m.segments_dropped) == (12, 3)
    m.on_restart("actor:0", ended_s=clock[0] + 0.2)  # killed 0.2 s after its last report
    assert m.env_steps_lost == pytest.approx(200) and m.env_steps == 1500
    m.on_restart("trainer:0")  # its batch held 2 segments; it resumes from version 5
    m.on_report(Role.ACTOR, 0, {**actor, "segments_lost": 3})  # slots it took back from the dead trainer
    m.on_report(Role.TRAINER, 0, {**trainer, "updates": 1, "policy_version": 6, "segments_pending": 0})
    assert (m.updates_lost, m.updates, m.segments_lost) == (7, 6, 5)
    metrics = m.metrics()
    assert (metrics["updates_lost"], metrics["segments_lost"], metrics["env_steps_lost"]) == (7, 5, 200)


def test_an_actor_counts_the_segments_a_restarted_trainer_held_and_a_trainer_those_of_a_dead_actor():
    transport, lives = InlineTransport(), Incarnations(["actor:0", "trainer:0"])
    slots = {(0, k): {"obs": np.zeros(3, np.float32)} for k in range(3)}
    producer = SampleProducer(transport, 0, slots, lives)
    consumer = SampleConsumer(transport, {(0, 0, k): slots[(0, k)] for k in range(3)}, lives)
    for _ in range(3):
        producer.send(0, producer.acquire(0))
    (taken,) = consumer.poll(limit=1)
    consumer.release(taken)  # one trained on, two held by the trainer when it dies
    lives.bump("trainer:0")
    producer.collect_releases()
    assert producer.reclaimed == 2
    trainer = SampleConsumer(transport, {(0, 0, k): slots[(0, k)] for k in range(3)}, lives)
    producer.send(0, producer.acquire(0))
    lives.bump("actor:0")  # the actor dies with its segment queued for the new trainer
    assert trainer.poll(limit=8) == [] and trainer.from_dead_actors == 1
    assert trainer.stale == 3, "the two meant for the dead trainer are stale too, but counted by the actor"


def test_killed_trainer_and_actor_losses_are_in_the_summary(run_dir):
    """A trainer killed with no checkpoint resumes from version 0: every update it reported is lost
    and `updates` counts each kept update once; a killed actor's unreported steps are estimated."""
    config = load_config("cartpole-ppo", [
        f"run.run_dir={run_dir}", "launch.launcher=local", "run.checkpoint_interval_s=3600", "stop.total_env_steps=300000",
        "dataflow.max_policy_lag=1000", "launch.max_restarts=5", *QUICK,
    ])  # fmt: skip
    killed: list[str | None] = []

    def version() -> int:
        lines = (run_dir / "metrics.jsonl").read_text().splitlines() if (run_dir / "metrics.jsonl").exists() else []
        return json.loads(lines[-1])["policy_version"] if lines else 0

    def killer() -> None:
        deadline = time.monotonic() + 120
        while version() < 20 and time.monotonic() < deadline:
            time.sleep(0.1)
        killed.append(kill_now(os.getpid(), ("trainer",), random.Random(0)))
        time.sleep(3)  # the new trainer reports
        killed.append(kill_now(os.getpid(), ("actor",), random.Random(0)))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    assert run_experiment(config) == 0
    thread.join()
    assert [k and k.split(":")[2] for k in killed] == ["trainer", "actor"], killed
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["restarts"] == {"trainer:0": 1, "actor:0": 1}, summary
    assert summary["updates_lost"] >= 20, summary
    assert summary["updates"] == summary["policy_version"], "each kept update counted once"
    # one actor group, one slot, batches of one segment: at most the one in flight and one taken
    assert 0 <= summary["segments_lost"] <= 2, summary
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    # at most one actor report's steps (0.5 s of them), fewer than the fastest metrics row's (1 s)
    fastest_row = max(b["env_steps"] - a["env_steps"] for a, b in zip(rows, rows[1:]))
    assert 0 < summary["env_steps_lost"] < fastest_row, (summary, fastest_row)
    assert rows[-1]["updates_lost"] == summary["updates_lost"] and "env_steps_lost" in rows[-1]


# ------------------------------------------------------------------ the socket directory


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_killed_controller_leaves_no_socket_directory(run_dir, monkeypatch, transport):
    base = Path(tempfile.mkdtemp(prefix="srl-ipc-", dir="/tmp"))  # short: socket paths have 107 bytes
    monkeypatch.setenv("SRL_IPC_DIR", str(base))
    try:
        proc = spawn(srl_command("run", "cartpole-ppo", f"run.run_dir={run_dir}", "stop.total_env_steps=10000000",
                                 f"dataflow.transport={transport}", *QUICK))
        wait_for_metrics(run_dir, proc)
        assert [p.name.startswith(IPC_PREFIX) for p in base.iterdir()] == [True]
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 20  # its workers notice within a report interval
        while list(base.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(base.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_next_run_removes_socket_directories_of_dead_controllers(tmp_path, monkeypatch):
    ended = subprocess.Popen(["true"])
    ended.wait()
    stale = tmp_path / f"{IPC_PREFIX}{ended.pid}-abc"
    live = tmp_path / f"{IPC_PREFIX}{os.getpid()}-def"
    other = tmp_path / "srl-something-else"
    for d in (stale, live, other):
        d.mkdir()
        (d / "controller.in").write_text("")
    assert remove_dead_ipc_dirs(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
    monkeypatch.setenv("SRL_IPC_DIR", str(tmp_path))
    made = make_ipc_dir("x1")
    assert made.name == f"{IPC_PREFIX}{os.getpid()}-x1" and made.is_dir()
