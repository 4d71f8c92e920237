"""What the controller reads from a worker's report, checked before it reads any of it.

A report is (kind, role, index) + one JSON object (srl.streams.control). The controller adds up
counts and seconds from it, keeps returns, compares versions (srl.launch.monitor): a report
signed by the run that named no worker of the run, or lacked one of those fields, or held text
where a count goes, a negative or huge count, returns and lengths that do not pair up, would
raise in the controller and end the run. It is dropped and counted instead, as every malformed
message is (srl.streams.schema). Every other declared field (one the controller only copies into
metrics) must hold what its type in srl.streams.reports says; an algorithm's stats, undeclared,
are written as they come.

Counts that are well formed must also be possible: what a worker's reports add to a count the
controller sums (env steps, episodes, updates, drops, seconds) is bounded by what that worker can
have done since the run's workers were launched (`ReportBounds`). A report past it is dropped and
counted the same way: a holder of the run's secret (docs/security.md) could otherwise push
summary.json's env_steps past the int64 range with two reports.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import UnionType
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin

from typing_extensions import get_type_hints, is_typeddict

from srl.monitor.episodes import WINDOW
from srl.monitor.info import episode_info_ok
from srl.streams.control import Kind, Role, attach, decode_report
from srl.streams.reports import BUSY_TIMES, REPORT_TYPES, REPORTS, ErrorReport, Key, ShellReport
from srl.streams.schema import Malformed
from srl.streams.transport import Message
from srl.workers.stop import StopKind

if TYPE_CHECKING:
    from srl.graph import Graph

STOP_KINDS = {kind.value for kind in StopKind}
INT64 = range(-(1 << 63), 1 << 63)
MAX_SECONDS = 1e9  # a report covers a fraction of a second; a run, at most years


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v < INT64.stop


def _int64(v: Any) -> bool:
    return type(v) is int and v in INT64


def _real(v: Any) -> bool:  # a return may be any float JSON holds (NaN included: the target test skips it)
    return type(v) is float or _int64(v)


def _seconds(v: Any) -> bool:
    return _real(v) and 0 <= v <= MAX_SECONDS


def _list_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: type(v) is list and all(check(x) for x in v)


def _map_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: type(v) is dict and all(type(k) is str and check(x) for k, x in v.items())


def _text(v: Any) -> bool:
    return type(v) is str


def _or_none(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or check(v)


def _write_failed(v: Any) -> bool:  # [errno, strerror, filename] (srl.storage.WriteFailed)
    return type(v) is list and len(v) == 3 and _or_none(_int64)(v[0]) and _text(v[1]) and _text(v[2])


def _bytes(v: Any) -> bool:  # an attachment put back (srl.streams.control.attach)
    return type(v) is bytes


def _eval(v: Any) -> bool:  # an ensemble member's evaluation, its weights attached (srl.workers.member)
    checks = {Key.ENV_STEPS: _count, Key.EVAL_RETURN: _real, Key.HPARAMS: _map_of(_real), Key.STATE: _bytes,
              Key.ADOPTIONS: _count}
    return type(v) is dict and all(key in v and check(v[key]) for key, check in checks.items())


def _policy_eval(v: Any) -> bool:  # the evaluator's round of one policy (srl.workers.evaluator)
    return type(v) is dict and _list_of(_real)(v.get(Key.EPISODE_RETURNS)) and _int64(v.get(Key.POLICY_VERSION))


def _policy_episodes(v: Any) -> bool:  # an actor's episodes of one policy (srl.workers.lanes)
    if type(v) is not dict or not _count(v.get(Key.EPISODES)):
        return False
    returns, lengths = v.get(Key.EPISODE_RETURNS), v.get(Key.EPISODE_LENGTHS)
    if not (isinstance(returns, list) and isinstance(lengths, list)):
        return False
    results = v.get(Key.RESULTS, {})  # a league's games by opponent: [wins, draws, losses]
    if not _map_of(lambda counts: type(counts) is list and len(counts) == 3 and all(map(_count, counts)))(results):
        return False
    return (_list_of(_real)(returns) and _list_of(_count)(lengths)
            and len(returns) == len(lengths) <= min(v[Key.EPISODES], WINDOW))


def _check_of(value_type: Any) -> Callable[[Any], bool]:
    """The check of a value of `value_type`, a report field's declared type (srl.streams.reports):
    what JSON makes of it (an int where a float goes; bool is no int)."""
    origin, args = get_origin(value_type), get_args(value_type)
    if origin in (Union, UnionType):
        checks = [_check_of(arg) for arg in args]
        return lambda v: any(check(v) for check in checks)
    if origin is list:
        return _list_of(_check_of(args[0]))
    if origin is dict:  # a JSON object's keys are text
        return _map_of(_check_of(args[1]))
    if is_typeddict(value_type):
        return _object_of(value_type)
    simple: dict[Any, Callable[[Any], bool]] = {int: _int64, float: _real, str: _text, bytes: _bytes,
                                                 type(None): lambda v: v is None}
    if value_type not in simple:
        raise TypeError(f"a report field of a type the check does not know: {value_type!r}")
    return simple[value_type]


def _object_of(report: type) -> Callable[[Any], bool]:
    """A JSON object of TypedDict `report`: its required keys present, each key's value its type's."""
    checks = {key: _check_of(value_type) for key, value_type in get_type_hints(report).items()}
    required = report.__required_keys__  # type: ignore[attr-defined]
    return lambda v: (type(v) is dict and all(key in v for key in required)
                      and all(check(v[key]) for key, check in checks.items() if key in v))


def declared_types() -> dict[str, Any]:
    """Every top-level report key and its declared value type (the shell's, an error report's and
    each role's: a key several roles send has one type, tests/test_reports_declared.py)."""
    out: dict[str, Any] = {}
    for report in (ShellReport, ErrorReport, *REPORT_TYPES.values()):
        out.update(get_type_hints(report))
    return out


# What every field must hold where present: where the controller computes with it, more than its
# type says (a count is not negative, seconds are bounded, returns and lengths pair up) ...
_COMPUTED: dict[str, Callable[[Any], bool]] = {
    Key.ENV_STEPS: _count,
    Key.EPISODE_RETURNS: _list_of(_real),
    Key.EPISODE_LENGTHS: _list_of(_count),
    Key.EPISODES: _count,  # how many finished; the lists carry the last of them (srl.monitor.episodes)
    Key.EVAL_EPISODE_RETURNS: _list_of(_real),
    Key.EVAL_POLICY_VERSION: _int64,
    Key.EVAL_POLICIES: _map_of(_policy_eval),
    Key.POLICY_VERSION: _or_none(_int64),
    Key.UPDATES: _count,
    Key.SEGMENTS_DROPPED: _count,
    Key.SEGMENTS_LOST: _count,
    Key.SEGMENTS_PENDING: _count,
    Key.NONFINITE_EPISODES_SKIPPED: _count,
    Key.NONFINITE_UPDATES_SKIPPED: _count,
    Key.STOP_REASON: _or_none(_text),
    Key.STOP_KIND: lambda v: type(v) is str and v in STOP_KINDS,  # which rule, beside a stop_reason (srl.workers.stop)
    Key.EVALS: _list_of(_eval),
    Key.POLICIES: _map_of(_policy_episodes),
    Key.EPISODE_INFO: episode_info_ok,  # monitor.info_keys: values per key, as many as the returns (srl.monitor.info)
    Key.ADOPTIONS: _count,
    Key.TIME_BREAKDOWN: _map_of(_seconds),
    Key.REJECTED: _map_of(_count),
    Key.DROPPED: _map_of(_count),
    **{key: _seconds for key in BUSY_TIMES},
    Key.TRACEBACK: _text,
    Key.HALT: _text,
    Key.WRITE_FAILED: _write_failed,
}
# ... and every other declared field its declared type: the check is looked up from the type, so
# the two cannot disagree (a field only copied into the metrics is still what its type says)
FIELDS: dict[str, Callable[[Any], bool]] = {
    **_COMPUTED, **{key: _check_of(t) for key, t in declared_types().items() if key not in _COMPUTED}}
_FIELD_ORDER = {key: i for i, key in enumerate(FIELDS)}
# what the controller reads of each role's reports: their declarations' (srl.streams.reports)
REQUIRED: dict[Role, tuple[str, ...]] = {role: declared.required for role, declared in REPORTS.items() if declared.required}


def payload_problem(kind: Kind, role: Role, payload: dict[str, Any]) -> str | None:
    """What makes `payload` unfit for the controller, or None."""
    if kind != Kind.ERROR:
        missing = [key for key in REQUIRED.get(role, ()) if key not in payload]
        if missing:
            return f"a {role.title} report without {', '.join(missing)}"
    # the payload's keys, not every field's: a report holds a few of them (FIELDS' order kept for the message)
    bad = [key for key in payload if key in FIELDS and not FIELDS[key](payload[key])]
    if bad:
        bad.sort(key=_FIELD_ORDER.__getitem__)
        return f"report fields of the wrong type or out of bounds: {', '.join(bad)}"
    returns, lengths = payload.get(Key.EPISODE_RETURNS, []), payload.get(Key.EPISODE_LENGTHS, [])
    if len(returns) != len(lengths):
        return f"{Key.EPISODE_RETURNS} and {Key.EPISODE_LENGTHS} differ in length"
    if payload.get(Key.EPISODES, len(returns)) < len(returns) or len(returns) > WINDOW:
        return f"more episode returns than episodes or than a report carries ({WINDOW})"
    return None


# What one worker can add to a count per second, per unit of it: generous on purpose. A report
# past its bound is lost to the run's counts (and its worker's heartbeat with it), so each rate is
# ten times or more what any worker was seen to do, and the bound only keeps a forged count within
# what the run's workers could have done.
# - env steps and episodes, per env of an actor or pod: one a microsecond. Each step of an env is
#   at least one pass of its worker's Python loop (step call, row copies, a request): one env
#   stepped alone tops out near 130,000 steps/s for CartPole with no srl around it
#   (docs/benchmarks.md, `limit`), a vectorised ring far lower per env. An env step ends at most
#   one episode per agent: episodes and skipped episodes get the same rate per agent row.
ENV_STEPS_PER_ENV_S = 1e6
# - updates, segments and messages, per worker: one a microsecond. An update is at least an
#   optimizer step and its UpdateGuard copy (~0.1 ms for a CartPole network); a segment or a
#   dropped message is at least one receive through a stream (a few us at best).
EVENTS_PER_WORKER_S = 1e6
# - seconds (busy times, the time breakdown): one a second; a worker's clock runs in one category
#   at a time (srl.monitor.timing), and it started after the controller's.
SECONDS_PER_S = 1.0
# Added to every worker's elapsed time, once: for a worker on another host whose clock runs a
# little fast, the rounding of reported seconds, and a worker that reaches a rate for a moment.
SLACK_S = 10.0
_PLAYERS, _LEARNERS = (Role.ACTOR, Role.POD), (Role.TRAINER, Role.POD)


@dataclass(frozen=True)
class Rate:
    """How much one worker may add to one count: `per_s` per second per unit of the worker (its
    envs, its env rows: envs x agents, or the worker itself), from the reports of `roles` (those
    the controller adds it from: srl.launch.monitor.RunMonitor.on_report; None: every role)."""

    per_s: float
    unit: str  # "envs", "rows" or "worker"
    roles: tuple[Role, ...] | None = None


def _episodes_of_policies(policies: dict[str, Any]) -> int:
    """The episodes of every policy of an actor's report, and its league games (one per episode)."""
    return sum(p[Key.EPISODES] + sum(map(sum, p.get(Key.RESULTS, {}).values())) for p in policies.values())


RATES: dict[str, Rate] = {
    Key.ENV_STEPS: Rate(ENV_STEPS_PER_ENV_S, "envs", _PLAYERS),
    Key.EPISODES: Rate(ENV_STEPS_PER_ENV_S, "rows", _PLAYERS),
    Key.NONFINITE_EPISODES_SKIPPED: Rate(ENV_STEPS_PER_ENV_S, "rows", _PLAYERS),
    Key.POLICIES: Rate(ENV_STEPS_PER_ENV_S, "rows", _PLAYERS),  # each policy's episodes and league games
    Key.UPDATES: Rate(EVENTS_PER_WORKER_S, "worker", _LEARNERS),
    Key.NONFINITE_UPDATES_SKIPPED: Rate(EVENTS_PER_WORKER_S, "worker", _LEARNERS),
    Key.SEGMENTS_DROPPED: Rate(EVENTS_PER_WORKER_S, "worker", _LEARNERS),
    Key.SEGMENTS_LOST: Rate(EVENTS_PER_WORKER_S, "worker"),
    # a gauge, not a count (the controller adds it to segments_lost when its trainer dies): charged
    # as one all the same, a few per report
    Key.SEGMENTS_PENDING: Rate(EVENTS_PER_WORKER_S, "worker"),
    Key.REJECTED: Rate(EVENTS_PER_WORKER_S, "worker"),
    Key.DROPPED: Rate(EVENTS_PER_WORKER_S, "worker"),
    Key.TIME_BREAKDOWN: Rate(SECONDS_PER_S, "worker"),
    **{key: Rate(SECONDS_PER_S, "worker") for key in BUSY_TIMES},
}


def _amount(key: str, payload: dict[str, Any]) -> float:
    """What `payload` adds to count `key` (0 where it has none); its fields are checked already."""
    if key == Key.EPISODES:  # absent: the returns it carries (srl.monitor.episodes)
        return payload.get(Key.EPISODES, len(payload.get(Key.EPISODE_RETURNS, ())))
    value = payload.get(key, 0)
    if key == Key.POLICIES:
        return _episodes_of_policies(value) if value else 0
    return sum(value.values()) if isinstance(value, dict) else value


class ReportBounds:
    """What each worker's reports may add up to, count by count (see RATES): its rate x its units
    x (the seconds since `started_s` + SLACK_S). The controller's workers are launched after
    `started_s` (its monitor's start), a restarted worker's lives one after another, so no honest
    sum of a worker's reports can pass it.

    One budget from the start, not one per report interval: reports that come in a burst (a
    controller busy for a moment drains several of a worker's at once) fit as long as their sum
    does, and the slack is given once per worker, not once per report (a forger sending many small
    reports gets no more than one large one). `clock` is time.monotonic, or a test's."""

    def __init__(self, units: dict[tuple[int, int], dict[str, int]], started_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.units, self.started_s, self.clock = units, started_s, clock
        self.used: dict[tuple[int, int], dict[str, float]] = {worker: {} for worker in units}
        # each role's counts, found once (per report, every rate was looked at and most skipped)
        self._rates = {role: [(key, rate) for key, rate in RATES.items() if rate.roles is None or role in rate.roles]
                       for role in Role}  # fmt: skip

    @classmethod
    def of_graph(cls, graph: Graph, started_s: float) -> ReportBounds:
        """Each worker's units: an actor or a pod steps dataflow.envs_per_actor envs of the graph's agents."""
        envs, agents = graph.config.dataflow.envs_per_actor, max(len(graph.agents), 1)
        units = {}
        for spec in graph.workers:
            plays = envs if spec.role in _PLAYERS else 0
            units[(int(spec.role), spec.index)] = {"envs": plays, "rows": plays * agents, "worker": 1}
        return cls(units, started_s)

    def problem(self, role: Role, index: int, payload: dict[str, Any]) -> str | None:
        """Why the report would take a count past its bound (nothing is charged then), or None:
        it is charged to the worker's budget."""
        worker = (int(role), index)
        used, units = self.used[worker], self.units[worker]
        elapsed_s = max(self.clock() - self.started_s, 0.0) + SLACK_S
        charges = {}
        for key, rate in self._rates[role]:
            if key not in payload and key != Key.EPISODES:  # (episodes absent: the returns it carries)
                continue
            amount = _amount(key, payload)
            if not amount:
                continue
            allowed = rate.per_s * units[rate.unit] * elapsed_s
            if used.get(key, 0) + amount > allowed:
                return (f"a report of {role.title}:{index} past what it can have done: {key} {amount} after "
                        f"{used.get(key, 0)} > {allowed:.6g} ({units[rate.unit]} {rate.unit} x {rate.per_s:g}/s x "
                        f"{elapsed_s:.1f} s, {SLACK_S:g} s of it slack)")
            charges[key] = amount
        for key, amount in charges.items():
            used[key] = used.get(key, 0) + amount
        return None


class ReportCheck:
    """The content check of the controller's inbox (srl.streams.control.report_schema): a report
    of one of `workers` (role, index), whose payload the controller can read, and (given
    `bounds`) whose counts its worker can have made.

    The payload it parsed is kept for the reader (`payload`): parsed again there, JSON was a
    seventh of the controller's time a report."""

    def __init__(self, workers: Iterable[tuple[Role, int]], bounds: ReportBounds | None = None) -> None:
        self.known = {(int(role), index) for role, index in workers}
        self.bounds = bounds
        # id(message) -> (the message, held so that its id is not reused; its payload), till the reader takes it
        self._parsed: dict[int, tuple[Message, dict[str, Any]]] = {}

    def __call__(self, message: Message) -> None:
        kind, role, index = message.header
        if (role, index) not in self.known:
            raise Malformed(f"a report of {Role(role).title}:{index}, no worker of this run")
        text = bytes(message.frames[0])
        try:
            payload = json.loads(text)
        except (ValueError, RecursionError) as error:  # not UTF-8 or not JSON; nested past the stack
            raise Malformed(f"a report payload that is not JSON: {type(error).__name__}") from None
        if type(payload) is not dict:
            raise Malformed("a report payload that is not a JSON object")
        try:  # its attachments back first: an evaluation's state must be bytes, not a stand-in
            payload = attach(payload, message.frames[1:], text)
        except ValueError as error:
            raise Malformed(f"a report's attachments: {error}") from None
        problem = payload_problem(Kind(kind), Role(role), payload)
        if not problem and self.bounds is not None and kind != Kind.ERROR:  # (an error report's counts are not read)
            problem = self.bounds.problem(Role(role), index, payload)
        if problem:
            raise Malformed(problem)
        self._parsed[id(message)] = (message, payload)

    def payload(self, message: Message) -> dict[str, Any]:
        """The payload of a report this check passed (parsed once); taken, not kept."""
        held = self._parsed.pop(id(message), None)
        return held[1] if held is not None and held[0] is message else decode_report(message)[3]

    def forget(self) -> None:
        """Drop the payloads not taken (a reader that stopped midway)."""
        self._parsed.clear()


def report_check(workers: Iterable[tuple[Role, int]], bounds: ReportBounds | None = None) -> ReportCheck:
    return ReportCheck(workers, bounds)
