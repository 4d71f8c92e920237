"""Fault soak: one CartPole run over tcp that is killed, replayed at, fed malformed signed
messages and poisoned with NaN observations, and must still reach its target with every fault
rejected or counted.

    python benchmarks/faults.py                      # 20 kills of every role, 1,000 replays, 100 malformed
    python benchmarks/faults.py --runs 3 --kills-per-role 25

Each run is `cartpole-ppo` with `dataflow.transport=tcp dataflow.inference=policy_worker` on a CartPole that turns
one observation in `--poison-every` steps into NaN (`dataflow.nonfinite_env=skip_episode`), in this one
process (the local launcher forks the workers from here, so every worker's signed sends are
recorded as a sniffer on the wire would see them). An attacker thread, once metrics flow:

1. kills: SIGKILLs a worker of the role with the fewest kills so far, every `--kill-interval-s`,
   until every role of the run (actor, policy, trainer, params) has `--kills-per-role`;
2. replays: once every worker is back, sends `--replays` recorded messages again to their streams,
   without the secret (no worker is killed meanwhile, so each receiver lives to count them);
3. malformed: sends `--malformed` messages signed with the run's secret but malformed (a header one
   field short or long, a frame missing, extra or one byte short), each under a fresh seal;
4. then waits for the mean return of episodes finished after all that to reach `--target-return`,
   and ends the run as Ctrl-C does (summary.json, final checkpoint).

Standard output gets ONE JSON line: per run the faults tried, the restarts and rejections counted,
whether the target was reached after the faults, and the losses the run counted; `all_counted`
says every kill was restarted, every replayed and malformed message rejected and counted, and
every poisoned step's episode skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import zmq

from srl.config.load import load_config
from srl.launch import local as local_launcher
from srl.launch.run import run_experiment
from srl.streams import tcp as tcp_module
from srl.streams.control import CONTROL_OUT
from srl.streams.framing import pack, unpack
from srl.streams.params import SERVICE_OUT
from srl.streams.wire import decode, encode

POISONED_ENV = "srl-bench/PoisonedCartPole-v1"
PUBLISHED = (CONTROL_OUT, SERVICE_OUT)
CAPTURE_PER_STREAM = 20  # recorded sends per process and stream: plenty to replay


class PoisonedCartPole(gym.Wrapper):
    """CartPole whose observation is NaN once in `every` steps (each one a file in `tried`: a
    lock shared by the workers would stop them all when one is killed holding it)."""

    tried: Path  # set before the run

    def __init__(self, every: int) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.every, self.rng = every, np.random.default_rng()  # its own draws: not one per process

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self.rng.integers(self.every) == 0:
            obs = np.array(obs, np.float32)
            obs[0] = np.nan
            (PoisonedCartPole.tried / f"{os.getpid()}-{time.monotonic_ns()}").touch()
        return obs, reward, terminated, truncated, info


class Attacker:
    """The faults of one run, in the order the module docstring gives."""

    def __init__(self, args: argparse.Namespace, run_dir: Path, captured: Path) -> None:
        self.args, self.run_dir, self.captured = args, run_dir, captured
        self.kills: Counter[str] = Counter()
        self.killed_pids: set[int] = set()
        self.replayed: Counter[str] = Counter()
        self.malformed: Counter[str] = Counter()
        self.faults_done_s: float | None = None  # time_s (the run's clock) when the last fault was sent
        self.reached_s: float | None = None
        self.rejected_before = 0  # rejected_messages when the replays start
        self.note = ""

    def start(self, wire) -> None:
        self.wire = wire
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            self._wait_for_metrics()
            roles = self._kill_all()
            self._wait_until_back(roles)
            recorded = self._drain()
            self.rejected_before = self._metrics()[-1]["rejected_messages"]  # in flight to restarted workers
            self._send(recorded, self.args.replays, self.replayed, lambda message: message[1])
            self._send(recorded, self.args.malformed, self.malformed, self._malform)
            self.faults_done_s = self._run_time_s()
            self._wait_for_target()
        except Exception as error:  # the soak reports what went wrong in its JSON line
            self.note = f"attacker: {type(error).__name__}: {error}"
        os.kill(os.getpid(), signal.SIGINT)  # end the run as Ctrl-C does

    # -- the run's workers and metrics ---------------------------------------------------------

    def _workers(self) -> dict[str, list[psutil.Process]]:
        by_role: dict[str, list[psutil.Process]] = {}
        for child in psutil.Process().children(recursive=True):
            try:
                title = child.cmdline()[0]
            except (psutil.Error, IndexError):
                continue
            if title.startswith("srl:"):
                by_role.setdefault(title.split(":")[2], []).append(child)
        return by_role

    def _metrics(self) -> list[dict]:
        path = self.run_dir / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def _run_time_s(self) -> float:
        rows = self._metrics()
        return rows[-1]["time_s"] if rows else 0.0

    def _wait_for_metrics(self) -> None:
        while not any(row["updates"] > 0 for row in self._metrics()):
            time.sleep(0.2)

    # -- faults ------------------------------------------------------------------------------

    def _kill_all(self) -> dict[str, int]:
        """SIGKILL workers until every role has its kills; the role -> worker count at the start."""
        rng, roles = random.Random(0), {r: len(ws) for r, ws in self._workers().items()}
        while min(self.kills[r] for r in roles) < self.args.kills_per_role:
            alive = self._workers()
            role = min((r for r in roles if alive.get(r)), key=lambda r: self.kills[r], default=None)
            if role is not None and self.kills[role] < self.args.kills_per_role:
                victim = rng.choice(alive[role])
                victim.send_signal(signal.SIGKILL)
                self.kills[role] += 1
                self.killed_pids.add(victim.pid)
            time.sleep(self.args.kill_interval_s)
        return roles

    def _wait_until_back(self, roles: dict[str, int]) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            alive = self._workers()
            if all(len(alive.get(r, [])) >= n for r, n in roles.items()):
                time.sleep(2.0)  # restarted workers connect their streams
                return
            time.sleep(0.2)
        raise TimeoutError(f"workers not back after 120 s: {roles}")

    def _drain(self) -> list[tuple[str, bytes]]:
        """What the workers recorded (one file per message, named `pid-n-stream`) for the streams
        a worker receives; those it publishes (parameters, epochs) reach only subscribers that
        connected to the publisher, so a stranger cannot send into them at all."""
        recorded = [(p.name.split("-", 2)[2], p.read_bytes()) for p in sorted(self.captured.iterdir())
                    if not p.name.endswith(".tmp")]  # fmt: skip
        recorded = [(name, data) for name, data in recorded if name not in PUBLISHED]
        if not recorded:
            raise RuntimeError("no message was recorded")
        return recorded

    def _send(self, recorded, count: int, sent: Counter, make) -> None:
        """`count` messages made from the recorded ones by `make`, round robin, to their streams."""
        context = zmq.Context()
        pushes: dict[str, zmq.Socket] = {}
        try:
            i = 0
            while sum(sent.values()) < count:
                name, data = recorded[i % len(recorded)]
                i += 1
                if name not in pushes:
                    pushes[name] = context.socket(zmq.PUSH)
                    pushes[name].setsockopt(zmq.LINGER, 2000)
                    pushes[name].connect(self.wire.connect_address(name))
                try:
                    pushes[name].send(make((name, data)), zmq.NOBLOCK)
                    sent[name] += 1
                except zmq.Again:  # not connected yet: not sent, not counted
                    time.sleep(0.01)
                if i % 50 == 0:
                    time.sleep(0.05)  # a few hundred messages a second, not one burst
        finally:
            context.destroy(linger=2000)

    def _malform(self, recorded: tuple[str, bytes]) -> bytes:
        """The recorded message made malformed in turn by each way, signed right, freshly sealed."""
        name, data = recorded
        message = decode(self.wire.secret, name, unpack(data, 1 << 16), self.wire.limits).message
        header, frames = list(message.header), [bytes(f) for f in message.frames]
        way = sum(self.malformed.values()) % 5
        if way == 0:
            header = header + [0]
        elif way == 1:
            header = header[:-1]
        elif way == 2:
            frames = frames + [b"\0" * 8]
        elif way == 3 and frames:
            frames = frames[:-1]
        elif frames:
            frames[-1] = frames[-1][:-1] if frames[-1] else b"\0"
        else:
            header = [2**62] * (len(header) + 3)
        return pack(encode(self.wire.secret, name, header, frames))

    def _wait_for_target(self) -> None:
        """Until the episodes finished after the faults average --target-return (or time runs out)."""
        deadline = time.monotonic() + self.args.after_faults_limit_s
        while time.monotonic() < deadline:
            rows = [r for r in self._metrics() if r["time_s"] > self.faults_done_s + 2 * self.args.log_interval_s]
            if rows and (rows[-1].get("episode_return_mean") or 0) >= self.args.target_return:
                self.reached_s = rows[-1]["time_s"]
                return
            time.sleep(0.5)


def soak(args: argparse.Namespace, seed: int) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="srl-faults-")) / "run"
    captured = run_dir.parent / "captured"
    captured.mkdir()
    attacker = Attacker(args, run_dir, captured)
    PoisonedCartPole.tried = run_dir.parent / "poisoned"
    PoisonedCartPole.tried.mkdir()
    restore = _tap(captured), local_launcher._tcp_wire
    make_wire = local_launcher._tcp_wire

    def wire_and_attack(graph):
        wire = make_wire(graph)
        attacker.start(wire)
        return wire

    local_launcher._tcp_wire = wire_and_attack
    config = load_config("cartpole-ppo", [
        f"env={POISONED_ENV}", f"env_kwargs={{every: {args.poison_every}}}", "dataflow.transport=tcp",
        "dataflow.inference=policy_worker", f"run.seed={seed}", f"run.run_dir={run_dir}", "monitor.display=off", "stop.target_return=null",
        "stop.total_env_steps=100000000", f"stop.time_limit_s={args.run_limit_s}", "run.checkpoint_interval_s=1",
        "launch.max_restarts=1000", "dataflow.nonfinite_env=skip_episode", "monitor.learning_curve=false",
        f"monitor.log_interval_s={args.log_interval_s}",
    ])  # fmt: skip
    try:
        exit_code = run_experiment(config)
        return _figures(attacker, config, run_dir, exit_code)
    finally:
        tcp_module._SignedSender.send, local_launcher._tcp_wire = restore
        shutil.rmtree(run_dir.parent, ignore_errors=True)


def _tap(captured: Path):
    """Record what each worker's signed senders put on the wire, a file per message (no lock is
    shared: a worker SIGKILLed while holding one would stop every other); the original send."""
    send = tcp_module._SignedSender.send
    taken: Counter[str] = Counter()  # per process (forked), per stream

    def tapped(self, header, frames=()):
        if taken[self.name] < CAPTURE_PER_STREAM:
            taken[self.name] += 1
            real = self.socket.send
            self.socket.send = lambda data, *a, **k: (_record(captured, self.name, data), real(data, *a, **k))[1]
            try:
                return send(self, header, frames)
            finally:
                self.socket.send = real
        return send(self, header, frames)

    tcp_module._SignedSender.send = tapped
    return send


def _record(captured: Path, stream: str, data: bytes) -> None:
    path = captured / f"{os.getpid()}-{time.monotonic_ns()}-{stream}"
    partial = path.parent / (path.name + ".tmp")  # a worker killed while writing leaves only this
    partial.write_bytes(data)
    partial.rename(path)


def _figures(attacker: Attacker, config, run_dir: Path, exit_code: int) -> dict:
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    sent = sum(attacker.replayed.values()) + sum(attacker.malformed.values())
    # a segment is one ring group's (srl.graph rows_per_split): with a policy worker, ring_splits
    # is 2 (since the defaults of 2026-11-25) and a segment half an actor's envs
    segment_steps = config.dataflow.sample_length * config.dataflow.envs_per_split
    slots_per_actor = config.dataflow.segment_slots * config.dataflow.ring_splits
    unaccounted = (summary["env_steps"] - rows[-1]["trained_env_steps"]
                   - (summary["segments_dropped"] + summary["segments_lost"]) * segment_steps
                   - summary["updates_lost"] * config.dataflow.batch_segments * segment_steps)  # fmt: skip
    in_flight = (slots_per_actor * config.launch.num_actor_workers + config.dataflow.batch_segments) * segment_steps
    poisoners = [int(p.name.split("-")[0]) for p in PoisonedCartPole.tried.iterdir()]
    poisoned = len(poisoners)
    # an actor killed before its next report takes its skipped episodes with it
    unreported = sum(pid in attacker.killed_pids for pid in poisoners)
    counted = (sum(summary["restarts"].values()) == sum(attacker.kills.values())
               and summary["rejected_messages"] - attacker.rejected_before == sent
               and poisoned - unreported <= summary["nonfinite_episodes_skipped"] <= poisoned
               and -summary["env_steps_lost"] <= unaccounted <= in_flight)  # fmt: skip
    return {
        "exit_code": exit_code, "ended_cleanly": exit_code == 130 and summary["stop_reason"] == "interrupted", "stop_reason": summary["stop_reason"], "note": attacker.note,
        "kills": dict(attacker.kills), "restarts": sum(summary["restarts"].values()),
        "replayed": dict(attacker.replayed), "malformed": dict(attacker.malformed),
        "rejected_messages": summary["rejected_messages"], "rejected_before_replays": attacker.rejected_before,
        "rejected_messages_by_stream": summary["rejected_messages_by_stream"],
        "poisoned_steps_tried": poisoned, "poisoned_by_killed_actors": unreported, "nonfinite_episodes_skipped": summary["nonfinite_episodes_skipped"],
        "target_reached": attacker.reached_s is not None,
        "faults_done_s": attacker.faults_done_s, "target_reached_s": attacker.reached_s,
        "env_steps": summary["env_steps"], "trained_env_steps": rows[-1]["trained_env_steps"],
        "segments_dropped": summary["segments_dropped"], "segments_lost": summary["segments_lost"],
        "env_steps_lost": summary["env_steps_lost"], "updates_lost": summary["updates_lost"],
        "unaccounted_env_steps": unaccounted, "in_flight_bound_env_steps": in_flight,
        "all_counted": counted, "wall_time_s": summary["wall_time_s"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--kills-per-role", type=int, default=20)
    parser.add_argument("--kill-interval-s", type=float, default=0.5)
    parser.add_argument("--replays", type=int, default=1000)
    parser.add_argument("--malformed", type=int, default=100)
    parser.add_argument("--poison-every", type=int, default=5000, help="one NaN observation per this many steps")
    parser.add_argument("--target-return", type=float, default=475.0)
    parser.add_argument("--log-interval-s", type=float, default=1.0)
    parser.add_argument("--after-faults-limit-s", type=float, default=300.0)
    parser.add_argument("--run-limit-s", type=float, default=900.0)
    args = parser.parse_args()
    gym.register(POISONED_ENV, entry_point=PoisonedCartPole, max_episode_steps=500)
    runs = [soak(args, seed) for seed in range(1, args.runs + 1)]
    print(json.dumps({
        "benchmark": "faults", "machine": f"{platform.machine()} {os.cpu_count()} cpus", "python": sys.version.split()[0],
        "runs": runs, "runs_finished": sum(r["ended_cleanly"] for r in runs),
        "targets_reached": sum(r["target_reached"] for r in runs), "all_counted": all(r["all_counted"] for r in runs),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
