"""Clean endings: a crashing environment, Ctrl-C and a killed worker each end the run with a clear
report and a non-zero exit, leaving no worker process and no shared memory (see conftest)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

TESTS = Path(__file__).parent


def srl_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "srl.cli", *args]


def as_from_a_terminal() -> None:
    """In the child: Ctrl-C as a terminal's foreground job has it. A test session started as a
    background job ignores SIGINT, and an ignored signal stays ignored across exec (srl then stops
    on SIGTERM only, by design: srl.launch.signals)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
        preexec_fn=as_from_a_terminal, **kwargs,
    )


def wait_for_metrics(run_dir: Path, proc: subprocess.Popen, lines: int = 2, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    path = run_dir / "metrics.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= lines:
            return
        time.sleep(0.1)
    raise AssertionError(f"no metrics after {timeout_s} s; output:\n{proc.communicate()[0]}")


def workers_of(proc: subprocess.Popen) -> list[psutil.Process]:
    return [c for c in psutil.Process(proc.pid).children(recursive=True) if "srl:" in " ".join(c.cmdline())]


def test_crashing_env_reports_its_traceback_and_exits_nonzero(run_dir):
    proc = spawn(
        srl_command(
            "run", "cartpole-ppo", "modules=crashing_env", "env=crashing", f"run.run_dir={run_dir}",
            "env_kwargs.crash_after_steps=200", "stop.target_return=null",
        )
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "worker actor:0 failed" in out
    assert "RuntimeError: boom: the environment crashed on purpose" in out
    assert 'crashing_env.py", line' in out  # the worker's own traceback, not the controller's
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "worker failed" and "boom" in summary["error"]
    assert summary["params_sha256"], "the other workers stopped cleanly: the trainer saved its state"


def test_ctrl_c_stops_every_worker_and_exits_130(run_dir):
    proc = spawn(srl_command("run", "cartpole-ppo", f"run.run_dir={run_dir}", "stop.target_return=null", "stop.total_env_steps=10000000000", "dataflow.inference=policy_worker"))
    wait_for_metrics(run_dir, proc)
    workers = workers_of(proc)
    titles = sorted(w.cmdline()[0] for w in workers)
    assert titles == [
        "srl:cartpole-ppo:actor:0", "srl:cartpole-ppo:params:0",
        "srl:cartpole-ppo:policy:0", "srl:cartpole-ppo:trainer:0",
    ], titles
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the whole foreground group
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert not [w for w in workers if w.is_running() and w.status() != psutil.STATUS_ZOMBIE]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted"
    assert summary["params_sha256"]  # the trainer stopped cleanly and wrote its last checkpoint
    assert (run_dir / "checkpoints" / "latest.json").is_file()


def test_a_killed_worker_ends_the_run_with_an_error_when_restarts_are_off(run_dir):
    proc = spawn(srl_command("run", "cartpole-ppo", f"run.run_dir={run_dir}", "stop.target_return=null", "stop.total_env_steps=10000000000", "dataflow.inference=policy_worker", "launch.max_restarts=0"))
    wait_for_metrics(run_dir, proc)
    policy = [w for w in workers_of(proc) if w.cmdline()[0].endswith(":policy:0")]
    policy[0].kill()
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert "worker policy:0 failed" in out and "code -9" in out


@pytest.mark.parametrize("launcher", ["local", "inline"])
def test_sigterm_to_the_controller_stops_cleanly(run_dir, launcher):
    """SIGTERM is Ctrl-C's equal (a shell's background job ignores SIGINT): the run still writes
    its summary, and the trainer its last checkpoint."""
    proc = spawn(srl_command("run", "cartpole-ppo", f"run.run_dir={run_dir}", "stop.target_return=null", "stop.total_env_steps=10000000000",
                             "dataflow.inference=policy_worker", f"launch.launcher={launcher}"))
    wait_for_metrics(run_dir, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted" and summary["params_sha256"], summary
    assert (run_dir / "checkpoints" / "latest.json").is_file()


def test_a_hung_worker_is_caught_by_its_missing_heartbeat(run_dir):
    proc = spawn(
        srl_command(
            "run", "cartpole-ppo", "modules=crashing_env", "env=crashing", f"run.run_dir={run_dir}",
            "env_kwargs.crash_after_steps=200", "env_kwargs.hang=true", "launch.heartbeat_timeout_s=3", "stop.target_return=null",
        )
    )
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    assert "worker actor:0 failed" in out and "no heartbeat for 3.0 s" in out


def test_sigterm_raises_keyboard_interrupt_in_the_main_thread_only():
    """The one SIGTERM rule of every launcher (srl.launch.signals): Ctrl-C's exception on the main
    thread, the previous handler back afterwards, and no change off the main thread, where
    handlers cannot be set."""
    import threading

    from srl.launch.signals import interrupt_on_sigterm

    before = signal.getsignal(signal.SIGTERM)
    restore = interrupt_on_sigterm()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs at the next bytecode; the sleep is interrupted
    finally:
        restore()
    assert signal.getsignal(signal.SIGTERM) is before
    off_main: list = []
    thread = threading.Thread(target=lambda: off_main.append(interrupt_on_sigterm()))
    thread.start()
    thread.join()
    off_main[0]()
    assert signal.getsignal(signal.SIGTERM) is before
