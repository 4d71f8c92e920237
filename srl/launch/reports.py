"""What the controller reads from a worker's report, checked before it reads any of it.

A report is (kind, role, index) + one JSON object (srl.streams.control). The controller adds up
counts and seconds from it, keeps returns, compares versions (srl.launch.monitor): a report
signed by the run that named no worker of the run, or lacked one of those fields, or held text
where a count goes, a negative or huge count, returns and lengths that do not pair up, would
raise in the controller and end the run. It is dropped and counted instead, as every malformed
message is (srl.streams.schema). Fields the controller only copies into metrics are not checked:
any JSON value is written as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from srl.launch.monitor import PER_WORKER_TIMES
from srl.monitor.episodes import WINDOW
from srl.monitor.timing import REPORT_KEY
from srl.streams.control import REJECTED_KEY, Kind, Role
from srl.streams.schema import Malformed
from srl.streams.transport import Message

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


def _eval(v: Any) -> bool:  # an ensemble member's evaluation (srl.workers.member)
    checks = {"env_steps": _count, "eval_return": _real, "hparams": _map_of(_real), "checkpoint": _text,
              "adoptions": _count}
    return type(v) is dict and all(key in v and check(v[key]) for key, check in checks.items())


def _policy_eval(v: Any) -> bool:  # the evaluator's round of one policy (srl.workers.evaluator)
    return type(v) is dict and _list_of(_real)(v.get("episode_returns")) and _int64(v.get("policy_version"))


def _policy_episodes(v: Any) -> bool:  # an actor's episodes of one policy (srl.workers.lanes)
    if type(v) is not dict or not _count(v.get("episodes")):
        return False
    returns, lengths = v.get("episode_returns"), v.get("episode_lengths")
    if not (isinstance(returns, list) and isinstance(lengths, list)):
        return False
    results = v.get("results", {})  # a league's games by opponent: [wins, draws, losses]
    if not _map_of(lambda counts: type(counts) is list and len(counts) == 3 and all(map(_count, counts)))(results):
        return False
    return (_list_of(_real)(returns) and _list_of(_count)(lengths)
            and len(returns) == len(lengths) <= min(v["episodes"], WINDOW))


# every field the controller computes with, and what it must hold where present
FIELDS: dict[str, Callable[[Any], bool]] = {
    "env_steps": _count,
    "episode_returns": _list_of(_real),
    "episode_lengths": _list_of(_count),
    "episodes": _count,  # how many finished; the lists carry the last of them (srl.monitor.episodes)
    "eval_episode_returns": _list_of(_real),
    "eval_policy_version": _int64,
    "eval_policies": _map_of(_policy_eval),
    "policy_version": _or_none(_int64),
    "updates": _count,
    "segments_dropped": _count,
    "segments_lost": _count,
    "segments_pending": _count,
    "nonfinite_episodes_skipped": _count,
    "nonfinite_updates_skipped": _count,
    "stop_reason": _or_none(_text),
    "evals": _list_of(_eval),
    "policies": _map_of(_policy_episodes),
    "adoptions": _count,
    REPORT_KEY: _map_of(_seconds),
    REJECTED_KEY: _map_of(_count),
    **{key: _seconds for key in PER_WORKER_TIMES},
    "traceback": _text,
    "halt": _text,
    "write_failed": _write_failed,
}
_PLAYS = ("env_steps", "episode_returns", "episode_lengths")
_TRAINS = ("segments_dropped", "updates")
REQUIRED: dict[Role, tuple[str, ...]] = {  # what the controller reads of each role's reports
    Role.ACTOR: _PLAYS,
    Role.POD: _PLAYS + _TRAINS,
    Role.TRAINER: _TRAINS,
    Role.EVAL: ("eval_episode_returns", "eval_policy_version"),
}


def payload_problem(kind: Kind, role: Role, payload: dict[str, Any]) -> str | None:
    """What makes `payload` unfit for the controller, or None."""
    if kind != Kind.ERROR:
        missing = [key for key in REQUIRED.get(role, ()) if key not in payload]
        if missing:
            return f"a {role.title} report without {', '.join(missing)}"
    bad = [key for key, check in FIELDS.items() if key in payload and not check(payload[key])]
    if bad:
        return f"report fields of the wrong type or out of bounds: {', '.join(bad)}"
    returns, lengths = payload.get("episode_returns", []), payload.get("episode_lengths", [])
    if len(returns) != len(lengths):
        return "episode_returns and episode_lengths differ in length"
    if payload.get("episodes", len(returns)) < len(returns) or len(returns) > WINDOW:
        return f"more episode returns than episodes or than a report carries ({WINDOW})"
    return None


def report_check(workers: Iterable[tuple[Role, int]]) -> Callable[[Message], None]:
    """The content check of the controller's inbox (srl.streams.control.report_schema): a report
    of one of `workers` (role, index), whose payload the controller can read."""
    known = {(int(role), index) for role, index in workers}

    def check(message: Message) -> None:
        kind, role, index = message.header
        if (role, index) not in known:
            raise Malformed(f"a report of {Role(role).title}:{index}, no worker of this run")
        try:
            payload = json.loads(bytes(message.frames[0]))
        except (ValueError, RecursionError) as error:  # not UTF-8 or not JSON; nested past the stack
            raise Malformed(f"a report payload that is not JSON: {type(error).__name__}") from None
        if type(payload) is not dict:
            raise Malformed("a report payload that is not a JSON object")
        problem = payload_problem(Kind(kind), Role(role), payload)
        if problem:
            raise Malformed(problem)

    return check
