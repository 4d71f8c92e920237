"""What each role's reports to the controller hold: every key spelled once (`Key`), and per role
a TypedDict of its report (`ActorReport`, ..., `REPORT_TYPES`): the keys the controller reads of
every report (Required), those a report may hold besides, and their values' types. `REPORTS` is
made from those types (what srl.launch.reports checks), not declared a second time.

A report is one JSON object a worker sends on the control stream (srl.streams.control) every
half second, and once more at its end: the kernel's counts since its last one
(srl.workers.kernel.Kernel.report), to which the worker shell adds its time breakdown and the
messages it dropped (srl.launch.shell). Its producers (the kernels), its reader
(srl.launch.monitor.RunMonitor, the observers of srl.launch.observers) and its check
(srl.launch.reports) all name a key by `Key` and hold a report as its role's type; the wire and
summary.json keep the strings.

Keys holding a "/" are an algorithm's stats (losses/..., a trainer's or pod's): copied into the
metrics, never read, so not declared; merged into a report in one place (`with_stats`). A custom worker's report (Role.CUSTOM) holds
what its user wrote.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeVar, cast

# typing's from Python 3.11 (Required); srl runs on 3.10 (pyproject requires-python)
from typing_extensions import Required, TypedDict

from srl.streams.control import Role


class Key:
    """Every key of a report, once; the roles that send each are in `REPORTS`."""

    # -- every worker, added by the shell (srl.launch.shell)
    TIME_BREAKDOWN: Final = "time_breakdown"  # {category: seconds} since the last report (srl.monitor.timing)
    REJECTED: Final = "rejected_messages"  # {stream: count} its receivers dropped: malformed, not signed, replayed
    DROPPED: Final = "dropped_messages"  # {stream: count} it dropped at a queue's bound (srl.streams.queues)
    # -- an error report (Kind.ERROR)
    TRACEBACK: Final = "traceback"
    HALT: Final = "halt"  # a RunHalted's line: the run ends, the worker is not restarted (srl.faults)
    WRITE_FAILED: Final = "write_failed"  # [errno, strerror, filename] of a failed run-file write (srl.storage)
    # -- what an actor or pod played since its last report
    ENV_STEPS: Final = "env_steps"
    EPISODES: Final = "episodes"  # how many finished; the two lists carry the last of them (srl.monitor.episodes)
    EPISODE_RETURNS: Final = "episode_returns"
    EPISODE_LENGTHS: Final = "episode_lengths"
    ENV_TIME_S: Final = "env_time_s"
    NONFINITE_EPISODES_SKIPPED: Final = "nonfinite_episodes_skipped"
    EPISODE_INFO: Final = "episode_info"  # monitor.info_keys: values per key, one per episode (srl.monitor.info)
    LOCK_STEP_SEGMENTS_SENT: Final = "lock_step_segments_sent"  # a lock-step actor's fewest sent, for a stall's message
    POLICIES: Final = "policies"  # several policies: {policy: its episodes, with RESULTS} (srl.workers.lanes)
    RESULTS: Final = "results"  # a league's games by opponent: [wins, draws, losses]
    SEGMENTS_LOST: Final = "segments_lost"  # an actor's, trainer's or buffer's: see srl.launch.monitor
    # -- what a trainer (or replay trainer, or pod) trained
    POLICY_VERSION: Final = "policy_version"  # its parameters' version (a policy worker's: the one it acts with)
    TRAINED_ENV_STEPS: Final = "trained_env_steps"
    UPDATES: Final = "updates"
    SEGMENTS_DROPPED: Final = "segments_dropped"
    SEGMENTS_PENDING: Final = "segments_pending"  # taken for the next update: lost with the trainer
    POLICY_LAG_MEAN: Final = "policy_lag_mean"
    TRAIN_TIME_S: Final = "train_time_s"
    NONFINITE_UPDATES_SKIPPED: Final = "nonfinite_updates_skipped"
    PARAMS_SHA256: Final = "params_sha256"  # in the last report only
    STOP_REASON: Final = "stop_reason"  # deterministic mode: the stop it decided (srl.workers.stop)
    STOP_KIND: Final = "stop_kind"
    INFER_TIME_S: Final = "infer_time_s"  # a pod's or policy worker's forward passes
    # -- an ensemble member (a pod, srl.workers.member), and each of its evaluations in EVALS
    MEMBER: Final = "member"
    ADOPTIONS: Final = "adoptions"
    HPARAMS: Final = "hparams"
    EVALS: Final = "evals"
    EVAL_RETURN: Final = "eval_return"
    STATE: Final = "state"  # an evaluation's weights, attached (srl.streams.control.attach)
    # -- the evaluator's last round (srl.workers.evaluator)
    EVAL_EPISODE_RETURNS: Final = "eval_episode_returns"
    EVAL_POLICY_VERSION: Final = "eval_policy_version"
    EVAL_TIME_S: Final = "eval_time_s"
    EVAL_POLICIES: Final = "eval_policies"  # several policies: {policy: {EPISODE_RETURNS, POLICY_VERSION}}
    # -- a policy worker
    ROWS: Final = "rows"
    BATCHES: Final = "batches"
    # -- the parameter service and its relays
    PARAMS_VERSION: Final = "params_version"
    PUBLISHES: Final = "publishes"
    WANTS_UPSTREAM: Final = "wants_upstream"
    # -- the replay buffer
    REPLAY_SIZE: Final = "replay_size"
    REPLAY_INSERTED: Final = "replay_inserted"
    SEGMENTS_STORED: Final = "segments_stored"
    BATCHES_SERVED: Final = "batches_served"
    PRIORITY_UPDATES: Final = "priority_updates"
    BUFFER_TIME_S: Final = "buffer_time_s"


# -- what each role's report holds: the field names are the keys' strings (Key), the types their
# values' on the wire (JSON: a float may come as an int). Required: the controller reads it of every
# report of the role; a report without one is dropped (srl.launch.reports). NotRequired: a report
# may hold it. A kernel's report() returns its role's type, so mypy checks each key a producer
# writes and each the reader takes (Key's names are Final: mypy reads `report[Key.UPDATES]` as
# the literal key "updates"); REPORTS below is made from these classes, not written again.


class ShellReport(TypedDict, total=False):
    """What the worker shell adds to every report (srl.launch.shell); a base of every role's."""

    time_breakdown: dict[str, float]  # Key.TIME_BREAKDOWN
    rejected_messages: dict[str, int]  # Key.REJECTED
    dropped_messages: dict[str, int]  # Key.DROPPED


class ErrorReport(TypedDict, total=False):
    """A worker's error report (Kind.ERROR, srl.launch.shell.error_report), whatever its role."""

    traceback: Required[str]
    halt: str
    write_failed: list[int | str | None]  # [errno, strerror, filename]


class Episodes(TypedDict):
    """Episodes finished since the last report (srl.monitor.episodes.episodes_report)."""

    episodes: int
    episode_returns: list[float]
    episode_lengths: list[int]


class LaneEpisodes(Episodes, total=False):
    """One policy's episodes in an actor's POLICIES (srl.workers.lanes)."""

    results: dict[str, list[int]]  # a league's games by opponent: [wins, draws, losses]


class MemberEval(TypedDict):
    """One of an ensemble member's EVALS (srl.workers.member), its weights attached."""

    member: int
    env_steps: int
    eval_return: float
    hparams: dict[str, float]
    state: bytes
    adoptions: int


class PolicyEval(TypedDict):
    """One policy's part of the evaluator's round, in EVAL_POLICIES (srl.workers.evaluator)."""

    episode_returns: list[float]
    policy_version: int


class SinkReport(TypedDict, total=False):
    """An actor's sample sink's part of its report (srl.streams.samples, srl.workers.lanes)."""

    segments_lost: int
    policies: dict[str, LaneEpisodes]


class StopReport(TypedDict, total=False):
    """A deterministic run's stop, once decided (srl.workers.stop)."""

    stop_reason: str | None
    stop_kind: str


class PlaysReport(ShellReport, total=False):
    """What an actor or a pod played since its last report: the monitor reads these of both."""

    env_steps: Required[int]
    episode_returns: Required[list[float]]
    episode_lengths: Required[list[int]]
    episodes: int
    env_time_s: float
    nonfinite_episodes_skipped: int
    episode_info: dict[str, list[float]]


class TrainsReport(ShellReport, total=False):
    """What a trainer (or replay trainer) or a pod trained: the monitor reads these of both."""

    segments_dropped: Required[int]
    updates: Required[int]
    policy_version: int
    trained_env_steps: int
    policy_lag_mean: float | None
    train_time_s: float
    nonfinite_updates_skipped: int
    params_sha256: str
    stop_reason: str | None
    stop_kind: str


class ActorReport(PlaysReport, total=False):
    segments_lost: int
    lock_step_segments_sent: int
    policies: dict[str, LaneEpisodes]


class PolicyReport(ShellReport, total=False):
    rows: int
    batches: int
    infer_time_s: float
    policy_version: int


class TrainerReport(TrainsReport, total=False):
    segments_lost: int
    segments_pending: int


class ParamsReport(ShellReport, total=False):
    params_version: int
    publishes: int


class RelayReport(ParamsReport, total=False):
    wants_upstream: int


class PodReport(PlaysReport, TrainsReport, total=False):
    infer_time_s: float
    member: int  # an ensemble member's (srl.workers.member): which, its adoptions, hparams, evaluations
    adoptions: int
    hparams: dict[str, float]
    evals: list[MemberEval]


class BufferReport(ShellReport, total=False):
    replay_size: int
    replay_inserted: int
    segments_stored: int
    batches_served: int
    priority_updates: int
    buffer_time_s: float
    segments_lost: int


class EvalReport(ShellReport, total=False):
    eval_episode_returns: Required[list[float]]
    eval_policy_version: Required[int]
    eval_time_s: float
    eval_policies: dict[str, PolicyEval]


StatsT = TypeVar("StatsT", bound=Mapping[str, object])


def with_stats(report: StatsT, stats: Mapping[str, float]) -> StatsT:
    """`report` with an algorithm's stats merged in last (a trainer's or pod's: losses/..., keys
    holding a "/"), the one place a report holds keys its type does not name: copied into the
    metrics as they come, never read, so not declared. The wire and summary.json keep them flat,
    beside the report's own keys. (The cast: the stats' keys are none of the type's.)"""
    return cast(StatsT, {**report, **stats})


SHELL = tuple(ShellReport.__annotations__)
FAILED = tuple(ErrorReport.__annotations__)


@dataclass(frozen=True)
class Declared:
    """One role's report: what the controller reads of every one (`required`; a report without
    one is dropped, srl.launch.reports), and what it may hold besides (`optional`; with `open`,
    any key: a custom worker's are its user's). Made from the role's TypedDict (`of`)."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    open: bool = False

    @classmethod
    def of(cls, report: type) -> "Declared":
        """The declaration of a report type: its keys in their order, the shell's aside."""
        own = [key for key in report.__annotations__ if key not in SHELL]
        required: frozenset[str] = report.__required_keys__  # type: ignore[attr-defined]
        return cls(tuple(k for k in own if k in required), tuple(k for k in own if k not in required))

    @property
    def keys(self) -> frozenset[str]:
        """Every key a report of the role may hold (the shell's and an error report's included)."""
        return frozenset((*self.required, *self.optional, *SHELL, *FAILED))


LANE_EPISODES = tuple(LaneEpisodes.__annotations__)  # each of POLICIES
MEMBER_EVAL = tuple(MemberEval.__annotations__)  # each of EVALS
POLICY_EVAL = tuple(PolicyEval.__annotations__)  # each of EVAL_POLICIES

# Each role's report type (a custom worker's is its user's: any JSON object)
REPORT_TYPES: dict[Role, type] = {
    Role.ACTOR: ActorReport, Role.POLICY: PolicyReport, Role.TRAINER: TrainerReport, Role.PARAMS: ParamsReport,
    Role.POD: PodReport, Role.BUFFER: BufferReport, Role.EVAL: EvalReport, Role.RELAY: RelayReport,
}
# a custom worker's: its user's (srl.api.worker)
REPORTS: dict[Role, Declared] = {role: Declared.of(REPORT_TYPES[role]) if role in REPORT_TYPES else Declared(open=True)
                                 for role in Role}
# The seconds a worker was busy, per role's work: summed per worker by the controller (busy_s)
BUSY_TIMES = (Key.ENV_TIME_S, Key.INFER_TIME_S, Key.TRAIN_TIME_S, Key.BUFFER_TIME_S)
