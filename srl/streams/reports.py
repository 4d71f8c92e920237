"""What each role's reports to the controller hold: every key spelled once (`Key`), and per role
the keys the controller reads of every report and those a report may hold besides (`REPORTS`).

A report is one JSON object a worker sends on the control stream (srl.streams.control) every
half second, and once more at its end: the kernel's counts since its last one
(srl.workers.kernel.Kernel.report), to which the worker shell adds its time breakdown and the
messages it dropped (srl.launch.shell). Its producers (the kernels), its reader
(srl.launch.monitor.RunMonitor, the observers of srl.launch.observers) and its check
(srl.launch.reports) all name a key by `Key`; the wire and summary.json keep the strings.

Keys holding a "/" are an algorithm's stats (losses/..., a trainer's or pod's): copied into the
metrics, never read, so not declared. A custom worker's report (Role.CUSTOM) holds what its user
wrote.
"""

from __future__ import annotations

from dataclasses import dataclass

from srl.streams.control import Role


class Key:
    """Every key of a report, once; the roles that send each are in `REPORTS`."""

    # -- every worker, added by the shell (srl.launch.shell)
    TIME_BREAKDOWN = "time_breakdown"  # {category: seconds} since the last report (srl.monitor.timing)
    REJECTED = "rejected_messages"  # {stream: count} its receivers dropped: malformed, not signed, replayed
    DROPPED = "dropped_messages"  # {stream: count} it dropped at a queue's bound (srl.streams.queues)
    # -- an error report (Kind.ERROR)
    TRACEBACK = "traceback"
    HALT = "halt"  # a RunHalted's line: the run ends, the worker is not restarted (srl.faults)
    WRITE_FAILED = "write_failed"  # [errno, strerror, filename] of a failed run-file write (srl.storage)
    # -- what an actor or pod played since its last report
    ENV_STEPS = "env_steps"
    EPISODES = "episodes"  # how many finished; the two lists carry the last of them (srl.monitor.episodes)
    EPISODE_RETURNS = "episode_returns"
    EPISODE_LENGTHS = "episode_lengths"
    ENV_TIME_S = "env_time_s"
    NONFINITE_EPISODES_SKIPPED = "nonfinite_episodes_skipped"
    EPISODE_INFO = "episode_info"  # monitor.info_keys: values per key, one per episode (srl.monitor.info)
    LOCK_STEP_SEGMENTS_SENT = "lock_step_segments_sent"  # a lock-step actor's fewest sent, for a stall's message
    POLICIES = "policies"  # several policies: {policy: its episodes, with RESULTS} (srl.workers.lanes)
    RESULTS = "results"  # a league's games by opponent: [wins, draws, losses]
    SEGMENTS_LOST = "segments_lost"  # an actor's, trainer's or buffer's: see srl.launch.monitor
    # -- what a trainer (or replay trainer, or pod) trained
    POLICY_VERSION = "policy_version"  # its parameters' version (a policy worker's: the one it acts with)
    TRAINED_ENV_STEPS = "trained_env_steps"
    UPDATES = "updates"
    SEGMENTS_DROPPED = "segments_dropped"
    SEGMENTS_PENDING = "segments_pending"  # taken for the next update: lost with the trainer
    POLICY_LAG_MEAN = "policy_lag_mean"
    TRAIN_TIME_S = "train_time_s"
    NONFINITE_UPDATES_SKIPPED = "nonfinite_updates_skipped"
    PARAMS_SHA256 = "params_sha256"  # in the last report only
    STOP_REASON = "stop_reason"  # deterministic mode: the stop it decided (srl.workers.stop)
    STOP_KIND = "stop_kind"
    INFER_TIME_S = "infer_time_s"  # a pod's or policy worker's forward passes
    # -- an ensemble member (a pod, srl.workers.member), and each of its evaluations in EVALS
    MEMBER = "member"
    ADOPTIONS = "adoptions"
    HPARAMS = "hparams"
    EVALS = "evals"
    EVAL_RETURN = "eval_return"
    STATE = "state"  # an evaluation's weights, attached (srl.streams.control.attach)
    # -- the evaluator's last round (srl.workers.evaluator)
    EVAL_EPISODE_RETURNS = "eval_episode_returns"
    EVAL_POLICY_VERSION = "eval_policy_version"
    EVAL_TIME_S = "eval_time_s"
    EVAL_POLICIES = "eval_policies"  # several policies: {policy: {EPISODE_RETURNS, POLICY_VERSION}}
    # -- a policy worker
    ROWS = "rows"
    BATCHES = "batches"
    # -- the parameter service and its relays
    PARAMS_VERSION = "params_version"
    PUBLISHES = "publishes"
    WANTS_UPSTREAM = "wants_upstream"
    # -- the replay buffer
    REPLAY_SIZE = "replay_size"
    REPLAY_INSERTED = "replay_inserted"
    SEGMENTS_STORED = "segments_stored"
    BATCHES_SERVED = "batches_served"
    PRIORITY_UPDATES = "priority_updates"
    BUFFER_TIME_S = "buffer_time_s"


@dataclass(frozen=True)
class Declared:
    """One role's report: what the controller reads of every one (`required`; a report without
    one is dropped, srl.launch.reports), and what it may hold besides (`optional`; with `open`,
    any key: a custom worker's are its user's)."""

    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    open: bool = False

    @property
    def keys(self) -> frozenset[str]:
        """Every key a report of the role may hold (the shell's and an error report's included)."""
        return frozenset((*self.required, *self.optional, *SHELL, *FAILED))


SHELL = (Key.TIME_BREAKDOWN, Key.REJECTED, Key.DROPPED)
FAILED = (Key.TRACEBACK, Key.HALT, Key.WRITE_FAILED)
PLAYS = (Key.ENV_STEPS, Key.EPISODE_RETURNS, Key.EPISODE_LENGTHS)  # read of every actor's and pod's
PLAYED = (Key.EPISODES, Key.ENV_TIME_S, Key.NONFINITE_EPISODES_SKIPPED, Key.EPISODE_INFO)
TRAINS = (Key.SEGMENTS_DROPPED, Key.UPDATES)  # read of every trainer's and pod's
TRAINED = (Key.POLICY_VERSION, Key.TRAINED_ENV_STEPS, Key.POLICY_LAG_MEAN, Key.TRAIN_TIME_S,
           Key.NONFINITE_UPDATES_SKIPPED, Key.PARAMS_SHA256, Key.STOP_REASON, Key.STOP_KIND)
LANE_EPISODES = (Key.EPISODES, Key.EPISODE_RETURNS, Key.EPISODE_LENGTHS, Key.RESULTS)  # each of POLICIES
MEMBER_EVAL = (Key.MEMBER, Key.ENV_STEPS, Key.EVAL_RETURN, Key.HPARAMS, Key.STATE, Key.ADOPTIONS)  # each of EVALS
POLICY_EVAL = (Key.EPISODE_RETURNS, Key.POLICY_VERSION)  # each of EVAL_POLICIES

REPORTS: dict[Role, Declared] = {
    Role.ACTOR: Declared(PLAYS, (*PLAYED, Key.SEGMENTS_LOST, Key.LOCK_STEP_SEGMENTS_SENT, Key.POLICIES)),
    Role.POLICY: Declared((), (Key.ROWS, Key.BATCHES, Key.INFER_TIME_S, Key.POLICY_VERSION)),
    Role.TRAINER: Declared(TRAINS, (*TRAINED, Key.SEGMENTS_LOST, Key.SEGMENTS_PENDING)),
    Role.PARAMS: Declared((), (Key.PARAMS_VERSION, Key.PUBLISHES)),
    Role.POD: Declared((*PLAYS, *TRAINS), (*PLAYED, *TRAINED, Key.INFER_TIME_S,
                                           Key.MEMBER, Key.ADOPTIONS, Key.HPARAMS, Key.EVALS)),
    Role.BUFFER: Declared((), (Key.REPLAY_SIZE, Key.REPLAY_INSERTED, Key.SEGMENTS_STORED, Key.BATCHES_SERVED,
                               Key.PRIORITY_UPDATES, Key.BUFFER_TIME_S, Key.SEGMENTS_LOST)),
    Role.EVAL: Declared((Key.EVAL_EPISODE_RETURNS, Key.EVAL_POLICY_VERSION), (Key.EVAL_TIME_S, Key.EVAL_POLICIES)),
    Role.CUSTOM: Declared(open=True),  # its user's (srl.api.worker)
    Role.RELAY: Declared((), (Key.PARAMS_VERSION, Key.PUBLISHES, Key.WANTS_UPSTREAM)),
}
# The seconds a worker was busy, per role's work: summed per worker by the controller (busy_s)
BUSY_TIMES = (Key.ENV_TIME_S, Key.INFER_TIME_S, Key.TRAIN_TIME_S, Key.BUFFER_TIME_S)
