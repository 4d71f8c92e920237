"""Column names of samples, defined once. Every stream and algorithm uses these constants.

A segment is a dict column -> array shaped [T + 1, rows, ...] (see srl.api.algorithm).
"""

OBS = "obs"  # observation at step t (float32, or uint8 for uint8 images, or the space's dtype)
ACTION = "action"  # action taken at step t
REWARD = "reward"  # reward of the transition t -> t + 1 (float32)
TERMINATED = "terminated"  # the episode ended on t -> t + 1, no bootstrap (bool)
TRUNCATED = "truncated"  # the episode was cut off on t -> t + 1, bootstrap (bool)
POLICY_VERSION = "policy_version"  # parameter version that chose the action at t (int64)

# Outputs that actor-critic policies add (Policy.rollout_fields):
LOG_PROB = "log_prob"  # log-probability of the action at t under the acting policy (float32)
VALUE = "value"  # value estimate of obs at t by the acting policy (float32)
# 1.0 if the row's agent acted at t, 0.0 if it waited for its turn (turn-based games; float32).
# Absent = every row acts on every step. See srl.algos.gae.compute_gae and srl.models.mappo.
ACTIVE = "active"

# Recurrent policies (srl.models.recurrent): the actor writes FIRST, the policy HIDDEN.
FIRST = "first"  # obs at t starts an episode, so the recurrent state is zeroed before it (bool)
HIDDEN = "hidden"  # recurrent state entering step t (after any reset), float32 [state size]

# Replay batches (buffer worker -> trainer), one row per transition, see srl.data.replay:
NEXT_OBS = "next_obs"  # observation the n-step target bootstraps from
DISCOUNT = "discount"  # gamma^m of the m steps taken, 0 after a termination (float32)
# REWARD holds the n-step discounted return in a replay batch
WEIGHT = "weight"  # importance-sampling weight of a prioritized sample, max 1 in its batch (float32)
INDEX = "index"  # replay index the row was sampled from (int64)
STAMP = "stamp"  # insertion number of the sampled transition, to skip stale priority updates (int64)
PRIORITY = "priority"  # |TD error| written back by the trainer before it releases the batch (float32)
