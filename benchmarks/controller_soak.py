"""The controller against 64 .. 4,096 synthetic workers: what one controller holds (issue 34).

The REAL controller code runs here: srl.launch.supervise.Supervisor's loop (`run`), its
RunMonitor, the report checks of srl.launch.reports, over a real TcpTransport. The workers are
synthetic: a few processes, each holding many workers' real control links (srl.streams.control.
WorkerLink: a signed sender to controller.in and a subscriber of control.out each, so the
controller holds one tcp connection per worker on each, as in a run), reporting every 0.5 s as a
worker's shell does (srl.launch.shell.REPORT_INTERVAL_S) with an actor's report, signed with the
run's secret. Their kills and starts are the `Workers` the supervisor restarts through.

For each size it measures, over `--steady-s` seconds of steady reporting:
- `us_per_report`: the controller thread's CPU time in `drain` (verify, check, feed the monitor) per report;
- `controller_cores`: the controller process's CPU (its ZeroMQ thread included) over wall time;
- `loop_ms_p50`, `loop_ms_p99`: the supervisor loop's period (it waits up to 50 ms for a report);
  measured once warm: every worker heard from and the backlog of the start (the workers report
  before the controller's first loop, as in a run) read;
- `false_timeouts`: workers restarted that had not ended (a heartbeat missed while they reported): must be 0;
then `exits` workers (256, or all actors of a smaller run) end at once, as on a lost node:
- `absorb_exits_s`: from their end to the last of them started again (one wait of 0.2 s for
  their error reports, one broadcast of their epochs); `absorb_check_s`: the supervisor's `check`
  call that restarted them, alone;
- `control_bytes_per_s_after_restart` (and `_per_worker`): bytes the controller sends on control.out
  (each message's wire size times its N subscribers) over `--after-s` seconds after the restarts:
  the epochs resent in turn, a bounded number of pairs a second; with srl's old whole-vector resend
  it was 8 N bytes to each of N workers each second (N^2);
- `epochs_mismatched`: workers whose copy of the epochs differs from the controller's at the end (0).

    python benchmarks/controller_soak.py                      # 64 256 1024 4096 workers
    python benchmarks/controller_soak.py --workers 1024       # one size
    python benchmarks/controller_soak.py --repeats 3          # sizes interleaved, 3 rounds

Prints one JSON line: {"runs": [...], "false_timeouts": {N: count}, ...}.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import io
import json
import math
import multiprocessing as mp
import os
import secrets
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from srl.config.checks import build_config  # noqa: E402
from srl.graph import build_graph  # noqa: E402
from srl.graph.wiring import incarnations  # noqa: E402
from srl.launch.monitor import RunMonitor  # noqa: E402
from srl.launch.shell import REPORT_INTERVAL_S  # noqa: E402
from srl.launch.supervise import Supervisor  # noqa: E402
from srl.streams.control import CONTROL_OUT, CONTROLLER_IN, Kind, Role, WorkerLink  # noqa: E402
from srl.streams.listeners import connection_cap  # noqa: E402
from srl.streams.reports import Key  # noqa: E402
from srl.streams.tcp import TcpTransport, Wire  # noqa: E402
from srl.streams.tcp_setup import SECRET_BYTES, free_ports, run_limits  # noqa: E402

SIZES = (64, 256, 1024, 4096)
EXITS = 256
WARM_LIMIT_S = 120.0  # a run not warm by then (every worker heard, loops short) is reported, not measured
LINK_POLL_S = 0.05  # how often a synthetic worker reads control.out (a real one: each ms while busy)


def soak_graph(workers: int, run_dir: str):
    """A tcp run of `workers` workers in all: actors, a trainer and the parameter service."""
    def config(actors: int):
        return build_config({"experiment": "soak", "run": {"run_dir": run_dir}, "dataflow": {"transport": "tcp"},
                             "launch": {"num_actor_workers": actors, "max_restarts": 1_000_000, "restart_window_s": 1.0},
                             "stop": {"total_env_steps": 2**53}})  # fmt: skip

    others = len(build_graph(config(1)).workers) - 1
    return build_graph(config(max(1, workers - others)))


def report_of(role: Role, reports: int) -> dict:
    """What a worker of `role` reports, as the shell sends it (kernel report, time breakdown)."""
    times = {Key.TIME_BREAKDOWN: {"env": 0.3, "waiting": 0.15, "other": 0.05}}
    if role == Role.ACTOR:
        return {Key.ENV_STEPS: 64, Key.EPISODE_RETURNS: [21.0], Key.EPISODE_LENGTHS: [21], Key.EPISODES: 1,
                Key.SEGMENTS_LOST: 0, Key.ENV_TIME_S: 0.3, **times}  # fmt: skip
    if role == Role.TRAINER:
        return {Key.SEGMENTS_DROPPED: 0, Key.UPDATES: 1, Key.POLICY_VERSION: reports, Key.TRAIN_TIME_S: 0.4, **times}
    return {Key.PARAMS_VERSION: reports, **times}


def synthetic_workers(wire: Wire, workers: list[tuple[int, int]], count: int, commands, results) -> None:
    """One process holding `workers` ((role, index)) of a run of `count` workers: each reports every
    REPORT_INTERVAL_S (staggered) until killed, again once started, until ("stop", epochs)."""
    transport = TcpTransport(wire, max_sockets=2 * len(workers))
    copies = {w: np.zeros(count, np.int64) for w in workers}  # each worker's own copy of the epochs
    links = {w: WorkerLink(transport, Role(w[0]), w[1], copies[w]) for w in workers}
    rng = np.random.default_rng(len(workers))
    # (when due, worker), soonest first: the loop looks only at the workers due (a look at each of
    # 1,024 workers every 5 ms cost each process a fifth of a core, beside the controller)
    due = [(time.monotonic() + rng.uniform(0, REPORT_INTERVAL_S), w) for w in workers]
    heapq.heapify(due)
    queued = set(workers)  # workers with an entry in `due`
    sent = dict.fromkeys(workers, 0)
    dead: set[tuple[int, int]] = set()
    next_poll = time.monotonic()
    try:
        while True:
            while not commands.empty():
                what, arg = commands.get()
                if what == "kill":
                    dead.add(arg)
                elif what == "start":
                    dead.discard(arg)
                    if arg not in queued:  # its entry left the heap when it was found dead
                        heapq.heappush(due, (time.monotonic(), arg))
                        queued.add(arg)
                else:  # stop: how many copies differ from the controller's epochs
                    results.put(sum(int((copies[w] != arg).any()) for w in workers))
                    return
            now = time.monotonic()
            while due and due[0][0] <= now:
                when, w = heapq.heappop(due)
                if w in dead:
                    queued.discard(w)
                    continue
                sent[w] += 1
                links[w].send(Kind.REPORT, report_of(Role(w[0]), sent[w]))
                heapq.heappush(due, (when + REPORT_INTERVAL_S, w))
            if now >= next_poll:
                for link in links.values():
                    link.poll_stop()
                next_poll = now + LINK_POLL_S
            time.sleep(0.005)
    finally:
        transport.close()


class SyntheticWorkers:
    """The supervisor's `Workers`: kills and starts go to the process that holds the worker."""

    def __init__(self, owner: dict[str, int], keys: dict[str, tuple[int, int]], queues: list) -> None:
        self.owner, self.keys, self.queues = owner, keys, queues
        self.exited: dict[str, int] = {}  # ended, as the soak says
        self.killed_alive: list[str] = []  # restarted although they had not ended: a false timeout
        self.starts: dict[str, float] = {}  # worker -> when it was last started
        self.started = 0  # starts in all

    def end(self, names: list[str]) -> None:
        for name in names:
            self.queues[self.owner[name]].put(("kill", self.keys[name]))
            self.exited[name] = -9

    def ended(self) -> dict[str, int]:
        return dict(self.exited)

    def kill(self, name: str) -> None:
        if name not in self.exited:
            self.killed_alive.append(name)
        self.queues[self.owner[name]].put(("kill", self.keys[name]))

    def start(self, spec, graph) -> None:
        self.exited.pop(spec.name, None)
        self.starts[spec.name] = time.monotonic()
        self.started += 1
        self.queues[self.owner[spec.name]].put(("start", self.keys[spec.name]))

    def running(self) -> bool:
        return True

    def close(self, terminate_first: bool = False) -> None:
        pass


class CountingDrops:
    """The control.out publisher's sends, counted in bytes on the wire (before its N copies)."""

    def __init__(self, inner) -> None:
        self.inner, self.bytes, self.messages = inner, 0, 0

    def send(self, socket, data, name) -> bool:
        self.bytes += len(data)
        self.messages += 1
        return self.inner.send(socket, data, name)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class SoakDone(Exception):
    pass


class Soak:
    """The supervisor's `outputs`: called once a loop, it keeps the phases and the clock."""

    def __init__(self, supervisor: Supervisor, workers: SyntheticWorkers, counting: CountingDrops,
                 warmup_s: float, steady_s: float, after_s: float, exits: list[str]) -> None:  # fmt: skip
        self.supervisor, self.workers, self.counting = supervisor, workers, counting
        self.exits, self.reports, self.drain_cpu_s = exits, 0, 0.0
        self.loop_s: list[float] = []
        self.warm_at, self.steady_s, self.last_tick_s = time.monotonic() + warmup_s, steady_s, time.monotonic()
        self.steady_at = self.exits_at = math.inf  # once warm: every worker heard, the backlog of the start read
        self.after_s, self.ended_s, self.absorbed_s, self.after_at = after_s, None, None, None
        self.figures: dict = {}
        drain, on_report = supervisor.drain, supervisor.monitor.on_report

        def timed_drain() -> None:
            start = time.thread_time()
            drain()
            self.drain_cpu_s += time.thread_time() - start

        def counted(*args, **kwargs) -> None:
            self.reports += 1
            on_report(*args, **kwargs)

        check = supervisor.check
        self.check_s: list[float] = []  # each check that restarted workers: how long it took

        def timed_check() -> None:
            start, started = time.monotonic(), self.workers.started
            check()
            if self.workers.started > started:
                self.check_s.append(time.monotonic() - start)

        supervisor.drain, supervisor.monitor.on_report = timed_drain, counted  # type: ignore[method-assign]
        supervisor.check = timed_check  # type: ignore[method-assign]

    def tick(self, monitor) -> None:
        now, period_s, self.last_tick_s = time.monotonic(), time.monotonic() - self.last_tick_s, time.monotonic()
        if self.steady_at == math.inf:
            heard = len(monitor.last_report_s) >= len(self.supervisor.specs)
            if now >= self.warm_at and heard and period_s < 0.2:
                self.steady_at, self.exits_at = now, now + self.steady_s
            elif now > self.warm_at + WARM_LIMIT_S:
                raise RuntimeError(f"not warm {WARM_LIMIT_S:g} s after the warm-up: {len(monitor.last_report_s)} of "
                                   f"{len(self.supervisor.specs)} workers heard, the last loop took {period_s:.2f} s")
            return
        if not self.loop_s:  # the steady window opens
            self.reports, self.drain_cpu_s, self.cpu0, self.bytes0 = 0, 0.0, time.process_time(), self.counting.bytes
        if now < self.exits_at:
            self.loop_s.append(now)
            return
        if self.ended_s is None:
            self._steady(now)
            self.ended_s = time.monotonic()
            self.workers.end(self.exits)
            return
        if self.absorbed_s is None:
            if all(self.workers.starts.get(name, 0) >= self.ended_s for name in self.exits):
                self.absorbed_s = max(self.workers.starts[name] for name in self.exits) - self.ended_s
                self.after_at, self.bytes_after0 = now + 1.0, None  # the restarts' own broadcast passes first
            return
        if now >= self.after_at and self.bytes_after0 is None:
            self.bytes_after0, self.after_t0 = self.counting.bytes, now
        elif self.bytes_after0 is not None and now - self.after_t0 >= self.after_s:
            self.bytes_after = (self.counting.bytes - self.bytes_after0) / (now - self.after_t0)
            raise SoakDone

    def _steady(self, now: float) -> None:
        wall = now - self.loop_s[0]
        periods = np.diff(self.loop_s) * 1e3
        self.figures = {
            "reports_per_s": round(self.reports / wall, 1),
            "us_per_report": round(1e6 * self.drain_cpu_s / max(self.reports, 1), 1),
            "controller_cores": round((time.process_time() - self.cpu0) / wall, 3),
            "loop_ms_p50": round(float(np.percentile(periods, 50)), 2),
            "loop_ms_p99": round(float(np.percentile(periods, 99)), 2),
            "control_bytes_per_s_before_restart": round((self.counting.bytes - self.bytes0) / wall, 1),
        }


def soak(workers: int, processes: int, warmup_s: float, steady_s: float, after_s: float, run_dir: str) -> dict:
    graph = soak_graph(workers, run_dir)
    names = [w.name for w in graph.workers]
    count = len(names)
    ports = dict(zip((CONTROLLER_IN, CONTROL_OUT), free_ports("127.0.0.1", 2)))
    # every worker connects to both controller streams, as in a run (srl.streams.tcp_setup.make_wire)
    wire = Wire(secrets.token_bytes(SECRET_BYTES), ports, limits=run_limits(graph),
                message_bytes=graph.message_bytes(shares_memory=False),
                connection_caps={name: connection_cap(count) for name in ports})  # fmt: skip
    keys = {w.name: (int(w.role), w.index) for w in graph.workers}
    processes = max(1, min(processes, count))
    owner = {name: i % processes for i, name in enumerate(names)}
    ctx = mp.get_context("fork")  # before this process opens any ZeroMQ context
    queues, results = [ctx.Queue() for _ in range(processes)], ctx.Queue()
    procs = [ctx.Process(target=synthetic_workers, daemon=True,
                         args=(wire, [keys[n] for n in names if owner[n] == p], count, queues[p], results))
             for p in range(processes)]  # fmt: skip
    for proc in procs:
        proc.start()
    transport = TcpTransport(wire, max_sockets=graph.sockets_per_process())
    try:
        inbox = transport.receiver(CONTROLLER_IN)
        publisher = transport.publisher(CONTROL_OUT)
        counting = CountingDrops(publisher.drops)  # type: ignore[attr-defined]
        publisher.drops = counting  # type: ignore[attr-defined]
        fake = SyntheticWorkers(owner, keys, queues)
        supervisor = Supervisor(graph, RunMonitor(graph.config), transport, inbox, fake, incarnations(graph, transport))
        actors = [n for n in names if n.startswith("actor:")]
        exits = actors[:: max(1, len(actors) // EXITS)][:EXITS]
        outputs = Soak(supervisor, fake, counting, warmup_s, steady_s, after_s, exits)
        try:
            with contextlib.redirect_stderr(io.StringIO()):  # its "srl: restarted ..." line for each exit
                supervisor.run(outputs)  # type: ignore[arg-type]
        except SoakDone:
            pass
        for q in queues:
            q.put(("stop", supervisor.incarnations.epochs.copy()))
        mismatched = sum(results.get(timeout=60) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        transport.close()
    return {
        "workers": count, **outputs.figures, "false_timeouts": len(fake.killed_alive),
        "exits": len(exits), "absorb_exits_s": round(outputs.absorbed_s or math.nan, 3),
        "absorb_check_s": round(max(outputs.check_s, default=math.nan), 3),
        "control_bytes_per_s_after_restart": round(outputs.bytes_after * count, 1),
        "control_bytes_per_worker_per_s_after_restart": round(outputs.bytes_after, 1),
        "epochs_mismatched": mismatched, "heartbeat_timeout_s": graph.config.launch.heartbeat_timeout_s,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=list(SIZES), help="run sizes (workers in all)")
    parser.add_argument("--repeats", type=int, default=1, help="rounds over the sizes, interleaved")
    parser.add_argument("--processes", type=int, default=4, help="processes holding the synthetic workers")
    parser.add_argument("--warmup-s", type=float, default=4.0, help="before measuring: every worker connects")
    parser.add_argument("--steady-s", type=float, default=10.0, help="steady reporting measured")
    parser.add_argument("--after-s", type=float, default=5.0, help="bytes on control.out measured after the exits")
    args = parser.parse_args(argv)
    import tempfile

    runs = []
    with tempfile.TemporaryDirectory() as run_dir:
        for _ in range(args.repeats):
            for workers in args.workers:
                load = [round(x, 2) for x in os.getloadavg()]
                try:
                    runs.append(soak(workers, args.processes, args.warmup_s, args.steady_s, args.after_s, run_dir))
                except RuntimeError as error:  # not warm in time: reported, and the other sizes still run
                    runs.append({"workers": workers, "error": str(error)})
                runs[-1]["loadavg_at_start"] = load
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    out = {"runs": runs, "false_timeouts": {}, "cpus": len(os.sched_getaffinity(0))}
    for run in runs:
        if "false_timeouts" in run:
            out["false_timeouts"][run["workers"]] = out["false_timeouts"].get(run["workers"], 0) + run["false_timeouts"]
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
