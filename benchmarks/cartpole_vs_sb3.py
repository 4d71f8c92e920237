"""Wall time to solve CartPole-v1: srl against Stable-Baselines3 PPO, side by side.

"Solved" is a mean return >= 475 over the last 100 finished episodes. For each seed the two run
one after the other (srl, then SB3), so drift in the machine's load hits both alike. Both are
timed from their launch: the parent notes `time.time()` just before it starts each process, and
interpreter start-up and imports count.

    python benchmarks/cartpole_vs_sb3.py                      # seeds 1 2 3, both sides
    python benchmarks/cartpole_vs_sb3.py --only sb3 --seeds 1
    python benchmarks/cartpole_vs_sb3.py --srl-experiment cartpole-pod   # the pod (issue 6)

SB3 runs in its own virtualenv (default `.bench/venv-sb3` at the repo root), created on first
use: torch==2.13.0 first (the CPU build), then stable-baselines3 and gymnasium. Progress goes to
stderr; standard output gets ONE JSON line at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SB3_SCRIPT = Path(__file__).resolve().parent / "_sb3_cartpole.py"
DEFAULT_VENV = REPO / ".bench" / "venv-sb3"
TARGET = 475.0
WINDOW = 100
TORCH_PIN = "torch==2.13.0"
SB3_PIN = "stable-baselines3==2.9.2"
SB3_FALLBACK = "stable-baselines3>=2,<3"
SB3_MAX_STEPS = 300_000
SB3_SCHEDULE_STEPS = 100_000  # rl-zoo's n_timesteps for CartPole-v1: lin_ schedules reach 0 there
READY_MARKER = ".sb3-ready.json"


def log(msg: str) -> None:
    print(f"[cartpole_vs_sb3] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ the SB3 virtualenv


def _venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _pip(py: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [str(py), "-m", "pip", "install", "--disable-pip-version-check", *args]
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)


def ensure_sb3_venv(venv: Path) -> tuple[Path, dict[str, str]]:
    """The venv's python and the versions in it, creating and filling the venv if needed."""
    py = _venv_python(venv)
    marker = venv / READY_MARKER
    if py.exists() and marker.exists():
        with contextlib.suppress(ValueError, OSError):
            return py, json.loads(marker.read_text())
    log(f"creating the SB3 virtualenv at {venv}")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, stdout=sys.stderr)
    # torch first and pinned: an unpinned resolve would pull a multi-GB CUDA build.
    if _pip(py, TORCH_PIN).returncode != 0:
        raise SystemExit(f"could not install {TORCH_PIN} into {venv}")
    if _pip(py, SB3_PIN, "gymnasium", TORCH_PIN).returncode != 0:
        log(f"{SB3_PIN} did not install; trying the newest 2.x")
        if _pip(py, SB3_FALLBACK, "gymnasium", TORCH_PIN).returncode != 0:
            raise SystemExit(f"could not install stable-baselines3 into {venv}")
    probe = (
        "import json, importlib.metadata as m; "
        "print(json.dumps({p: m.version(p) for p in ('stable-baselines3', 'gymnasium', 'torch', 'numpy')}))"
    )
    versions = json.loads(subprocess.run([str(py), "-c", probe], check=True, capture_output=True, text=True).stdout)
    marker.write_text(json.dumps(versions))
    log(f"SB3 virtualenv ready: {versions}")
    return py, versions


# ------------------------------------------------------------------ child processes


def _kill_group(proc: subprocess.Popen) -> None:
    """End the child's whole session (and descendants that left it): TERM, 5 s grace, then KILL."""
    descendants: list = []
    try:
        import psutil

        with contextlib.suppress(psutil.Error):
            descendants = psutil.Process(proc.pid).children(recursive=True)
    except ImportError:
        pass

    def signal_all(sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        for child in descendants:
            with contextlib.suppress(Exception):
                child.send_signal(sig)

    signal_all(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    signal_all(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def run_child(cmd: list[str], *, cwd: Path, env: dict[str, str], log_path: Path, timeout_s: float) -> dict:
    """Run `cmd` in its own session, output to `log_path`; the group is killed on timeout or Ctrl-C."""
    with open(log_path, "wb") as out:
        launch = time.time()
        proc = subprocess.Popen(
            cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:  # Ctrl-C: take the child's whole group down with us
            _kill_group(proc)
            raise
        wall = time.time() - launch
        # the leader has exited; end anything it left behind in its session
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    return {"launch": launch, "wall_s": wall, "returncode": proc.returncode, "timed_out": timed_out}


def _tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_bytes()[-n:].decode("utf-8", "replace")
    except OSError:
        return ""


def _child_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp)  # SB3 and torch litter the temp dir
    env["PYTHONUNBUFFERED"] = "1"
    return env


# ------------------------------------------------------------------ the two sides


def parse_srl_metrics(path: Path, target: float = TARGET, window: int = WINDOW) -> dict[str, Any]:
    """The first report in an srl `metrics.jsonl` whose episode_return_mean >= target.

    A report counts only once `window` episodes have finished, where the report says how many
    (`episodes`); lines that are not JSON objects (a torn last line) are skipped.
    Returns {"reached", "time_s", "env_steps", "reports", "last"}.
    """
    reached = None
    reports = 0
    last = None
    if path.exists():
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(row, dict):
                    continue
                reports += 1
                last = row
                ret = row.get("episode_return_mean", row.get("charts/episode_return_mean"))
                episodes = row.get("episodes", row.get("charts/episodes"))
                if not isinstance(ret, (int, float)) or isinstance(ret, bool) or math.isnan(ret):
                    continue
                if isinstance(episodes, (int, float)) and episodes < window:
                    continue
                if ret >= target and reached is None:
                    reached = row
    return {
        "reached": reached is not None,
        "time_s": float(reached["time_s"]) if reached and reached.get("time_s") is not None else None,
        "env_steps": int(reached["env_steps"]) if reached and reached.get("env_steps") is not None else None,
        "reports": reports,
        "last": last,
    }


def run_srl(seed: int, timeout_s: float, workdir: Path, experiment: str = "cartpole-ppo") -> dict[str, Any]:
    run_dir = workdir / f"srl-seed{seed}"
    cmd = [sys.executable, "-m", "srl.cli", "run", experiment, f"run.seed={seed}", f"stop.target_return={TARGET:g}",
           f"run.run_dir={run_dir}"]
    env = _child_env(workdir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    log_path = workdir / f"srl-seed{seed}.log"
    log(f"srl  run.seed={seed}: {' '.join(cmd)}")
    proc = run_child(cmd, cwd=REPO, env=env, log_path=log_path, timeout_s=timeout_s)
    parsed = parse_srl_metrics(run_dir / "metrics.jsonl")
    summary = None
    with contextlib.suppress(OSError, ValueError):
        summary = json.loads((run_dir / "summary.json").read_text())
    # srl's time_s counts from its command's first line: add the interpreter's start before it
    started_unix_s = (summary or {}).get("started_unix_s")
    interpreter_s = started_unix_s - proc["launch"] if started_unix_s else 0.0
    time_s = round(parsed["time_s"] + interpreter_s, 3) if parsed["time_s"] is not None else None
    result = {
        "seed": seed,
        "reached": parsed["reached"],
        "time_s": time_s,
        "interpreter_start_s": round(interpreter_s, 3),
        "env_steps": parsed["env_steps"],
        "launch_to_exit_s": round(proc["wall_s"], 3),
        "returncode": proc["returncode"],
        "timed_out": proc["timed_out"],
        "reports": parsed["reports"],
        "summary": summary,
    }
    if not parsed["reached"]:
        result["log_tail"] = _tail(log_path)
        log(f"srl  run.seed={seed}: did not reach {TARGET:g} (rc={proc['returncode']}, timed_out={proc['timed_out']})"
            f"\n{result['log_tail']}")
    else:
        log(f"srl  run.seed={seed}: {time_s:.1f} s, {parsed['env_steps']} env steps "
            f"(launch to exit {proc['wall_s']:.1f} s)")
    return result


def run_sb3(seed: int, timeout_s: float, workdir: Path, py: Path, schedule_steps: int = SB3_SCHEDULE_STEPS,
            torch_threads: int | None = None) -> dict[str, Any]:
    log_path = workdir / f"sb3-seed{seed}.log"
    start = time.time()
    cmd = [str(py), str(SB3_SCRIPT), "--seed", str(seed), "--start-time", repr(start), "--target", f"{TARGET:g}",
           "--window", str(WINDOW), "--max-steps", str(SB3_MAX_STEPS), "--schedule-steps", str(schedule_steps)]
    if torch_threads:
        cmd += ["--torch-threads", str(torch_threads)]
    log(f"sb3  run.seed={seed}")
    proc = run_child(cmd, cwd=workdir, env=_child_env(workdir), log_path=log_path, timeout_s=timeout_s)
    out = None
    for line in reversed(_tail(log_path, 20000).splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out = json.loads(line)
                break
    reached = bool(out and out.get("reached"))
    result = {
        "seed": seed,
        "reached": reached,
        "time_s": out.get("time_s") if reached else None,
        "env_steps": out.get("env_steps") if reached else None,
        "launch_to_exit_s": round(proc["wall_s"], 3),
        "returncode": proc["returncode"],
        "timed_out": proc["timed_out"],
        "child": out,
    }
    if not reached:
        result["log_tail"] = _tail(log_path)
        log(f"sb3  run.seed={seed}: did not reach {TARGET:g} (rc={proc['returncode']}, timed_out={proc['timed_out']})"
            f"\n{result['log_tail']}")
    else:
        log(f"sb3  run.seed={seed}: {result['time_s']:.1f} s, {result['env_steps']} env steps "
            f"(launch to exit {proc['wall_s']:.1f} s)")
    return result


# ------------------------------------------------------------------ report


def _median(times: list[float | None]) -> float | None:
    """Median with a run that never got there counted as slower than all: None if that is the median."""
    if not times:
        return None
    m = statistics.median([math.inf if t is None else t for t in times])
    return None if math.isinf(m) else round(m, 3)


def _side(runs: list[dict]) -> dict[str, Any]:
    times = [r["time_s"] for r in runs]
    return {"median": _median(times), "runs": times, "reached": sum(r["reached"] for r in runs), "of": len(runs)}


def _git_commit() -> str | None:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }
    with contextlib.suppress(AttributeError, OSError):
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(AttributeError, OSError):
        info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        info["torch"] = importlib.metadata.version("torch")
    return info


def build_report(srl_runs: list[dict], sb3_runs: list[dict], machine: dict, sb3_versions: dict | None,
                 args: argparse.Namespace, interrupted: bool = False) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "cartpole_vs_sb3",
        "env": "CartPole-v1",
        "target_return": TARGET,
        "window": WINDOW,
        "seeds": args.seeds,
        "timeout_s": args.timeout_s,
        "machine": machine,
        "srl_commit": _git_commit(),
        "srl_experiment": args.srl_experiment,
    }
    if sb3_versions is not None:
        report["sb3_version"] = sb3_versions.get("stable-baselines3")
        report["sb3_env_versions"] = sb3_versions
        report["sb3_max_steps"] = SB3_MAX_STEPS
        report["sb3_schedule_steps"] = args.sb3_schedule_steps
        report["sb3_torch_threads"] = sorted({r["child"]["torch_threads"] for r in sb3_runs if r.get("child")})
    if args.only in (None, "srl"):
        report["srl_time_to_475_s"] = _side(srl_runs)
        report["srl_steps_to_475"] = [r["env_steps"] for r in srl_runs]
        report["srl_launch_to_exit_s"] = [r["launch_to_exit_s"] for r in srl_runs]
    if args.only in (None, "sb3"):
        report["sb3_time_to_475_s"] = _side(sb3_runs)
        report["sb3_steps_to_475"] = [r["env_steps"] for r in sb3_runs]
        report["sb3_launch_to_exit_s"] = [r["launch_to_exit_s"] for r in sb3_runs]
    srl_med = report.get("srl_time_to_475_s", {}).get("median")
    sb3_med = report.get("sb3_time_to_475_s", {}).get("median")
    report["ratio_sb3_over_srl_median"] = round(sb3_med / srl_med, 3) if srl_med and sb3_med else None
    failures = [
        {"side": side, **{k: r[k] for k in ("seed", "returncode", "timed_out")}, "log_tail": r.get("log_tail", "")[-500:]}
        for side, runs in (("srl", srl_runs), ("sb3", sb3_runs)) for r in runs if not r["reached"]
    ]
    if failures:
        report["failures"] = failures
    if interrupted:
        report["interrupted"] = True
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--only", choices=["srl", "sb3"], default=None, help="run one side only")
    ap.add_argument("--srl-experiment", default="cartpole-ppo",
                    help="srl's side: cartpole-ppo (dataflow, the default) or cartpole-pod (one-process pod)")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="limit for each run (default 300)")
    ap.add_argument("--venv", type=Path, default=DEFAULT_VENV, help=f"SB3 virtualenv (default {DEFAULT_VENV})")
    ap.add_argument("--sb3-schedule-steps", type=int, default=SB3_SCHEDULE_STEPS,
                    help="steps over which SB3's linear lr/clip schedules reach 0 (default: rl-zoo's 1e5)")
    ap.add_argument("--sb3-torch-threads", type=int, default=None,
                    help="torch threads for SB3 (default: torch's own, i.e. SB3 out of the box; srl uses 1 a process)")
    args = ap.parse_args(argv)

    def on_sigterm(signum, frame):  # terminated like Ctrl-C: children's groups are ended on the way out
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)

    machine = machine_info()
    sb3_py, sb3_versions = (None, None)
    if args.only in (None, "sb3"):
        sb3_py, sb3_versions = ensure_sb3_venv(args.venv.resolve())

    srl_runs: list[dict] = []
    sb3_runs: list[dict] = []
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="cartpole_vs_sb3-") as tmp:
        workdir = Path(tmp)
        try:
            for seed in args.seeds:  # interleaved: srl then SB3 for each seed
                if args.only in (None, "srl"):
                    srl_runs.append(run_srl(seed, args.timeout_s, workdir, args.srl_experiment))
                if args.only in (None, "sb3"):
                    sb3_runs.append(run_sb3(seed, args.timeout_s, workdir, sb3_py, args.sb3_schedule_steps,
                                           args.sb3_torch_threads))
        except KeyboardInterrupt:
            interrupted = True
            log("interrupted; child processes ended")
    report = build_report(srl_runs, sb3_runs, machine, sb3_versions, args, interrupted)
    print(json.dumps(report), flush=True)
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
