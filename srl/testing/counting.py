"""`CountingEnv` ("counting"): a deterministic env whose observations say exactly which step they
are, and `check_counts`, which proves from collected samples that no transition was lost or
duplicated between actors and the trainer.

Each agent observes the float32 vector [env_id, episode_index, step_in_episode, agent_index].
The first `reset` starts episode 0; every further reset starts the next episode. Every step
gives reward 1.0; all agents terminate together when step_in_episode reaches `episode_length`,
so one episode has `episode_length` transitions, observed at steps 0 .. episode_length - 1.
(float32 holds env ids and episode indices exactly up to 2**24.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from srl.api.env import Environment, EnvStep
from srl.api.registry import register_env

OBS_SIZE = 4  # env_id, episode_index, step_in_episode, agent_index


@register_env("counting")
class CountingEnv(Environment):
    """Deterministic counting env; `env_id` must be unique across the whole run."""

    def __init__(self, env_id: int, episode_length: int = 5, num_agents: int = 1) -> None:
        if episode_length < 1 or num_agents < 1:
            raise ValueError(
                f"CountingEnv needs episode_length >= 1 and num_agents >= 1, got "
                f"{episode_length} and {num_agents}"
            )
        self.env_id = int(env_id)
        self.episode_length = int(episode_length)
        self.agents = tuple(f"agent_{j}" for j in range(num_agents))
        obs_space = gym.spaces.Box(low=0.0, high=np.inf, shape=(OBS_SIZE,), dtype=np.float32)
        self.observation_spaces = {a: obs_space for a in self.agents}
        self.action_spaces = {a: gym.spaces.Discrete(2) for a in self.agents}
        self.episode_index = -1
        self.step_in_episode = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            a: np.array([self.env_id, self.episode_index, self.step_in_episode, j], dtype=np.float32)
            for j, a in enumerate(self.agents)
        }

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        self.episode_index += 1
        self.step_in_episode = 0
        return self._obs()

    def step(self, actions: Mapping[str, Any]) -> EnvStep:
        if self.episode_index < 0:
            raise RuntimeError("CountingEnv.step before reset")
        if set(actions) != set(self.agents):
            raise ValueError(
                f"CountingEnv {self.env_id}: actions for {sorted(actions)}, expected {list(self.agents)}"
            )
        self.step_in_episode += 1
        done = self.step_in_episode >= self.episode_length
        return EnvStep(
            obs=self._obs(),
            reward={a: 1.0 for a in self.agents},
            terminated={a: done for a in self.agents},
            truncated={a: False for a in self.agents},
            info={a: {} for a in self.agents},
        )


def _as_int(x: np.ndarray, what: str) -> np.ndarray:
    r = np.rint(x)
    if not np.array_equal(r, x):
        raise AssertionError(f"counting observations: non-integer {what} values, e.g. {x[r != x][:3]}")
    return r.astype(np.int64)


def check_counts(
    obs_list: Sequence[np.ndarray],
    terminated_list: Sequence[np.ndarray] | None = None,
    episode_length: int | None = None,
) -> dict[str, Any]:
    """Check that segments of CountingEnv samples hold every transition exactly once.

    `obs_list`: one obs array [T + 1, rows, 4] per segment (segments in any order, any mix of
    actors; T and rows may differ between segments). Only time rows 0 .. T-1 are transitions
    (row T is repeated as row 0 of the actor's next segment). `terminated_list`: the segments'
    terminated arrays [T + 1, rows], same order, optional. `episode_length`: optional.

    For each stream (env_id, agent_index) the (episode_index, step) pairs seen must be exactly
    (0, 0), (0, 1), ..., in order of episode then step, up to the latest one seen: no gap and no
    duplicate. The episode length per env is `episode_length`, else read from the steps flagged
    terminated, else (no terminated flags given) the largest step seen + 1, in which case losing
    the last step of every episode of an env cannot be told apart from a shorter episode.
    With terminated flags, a transition must be terminated exactly when it is an episode's last.

    Raises AssertionError naming the stream and the missing or duplicated (episode, step).
    Returns totals: transitions, streams, envs, completed_episodes (summed over streams),
    per_stream {(env_id, agent_index): transitions}.
    """
    if len(obs_list) == 0:
        raise AssertionError("check_counts: no segments")
    records = []
    flags = []
    for k, obs in enumerate(obs_list):
        obs = np.asarray(obs)
        if obs.ndim != 3 or obs.shape[2] != OBS_SIZE or obs.shape[0] < 2:
            raise AssertionError(f"segment {k}: obs shaped {obs.shape}, expected [T + 1, rows, {OBS_SIZE}]")
        records.append(obs[:-1].reshape(-1, OBS_SIZE))
        if terminated_list is not None:
            term = np.asarray(terminated_list[k])
            if term.shape != obs.shape[:2]:
                raise AssertionError(f"segment {k}: terminated shaped {term.shape}, obs {obs.shape}")
            flags.append(term[:-1].reshape(-1).astype(bool))
    data = np.concatenate(records).astype(np.float64)
    env_id, episode, step, agent = (
        _as_int(data[:, c], name) for c, name in enumerate(("env_id", "episode_index", "step", "agent_index"))
    )
    terminated = np.concatenate(flags) if terminated_list is not None else None
    if (episode < 0).any() or (step < 0).any():
        raise AssertionError("counting observations: negative episode index or step")

    # Episode length per env (indexed by position in `envs`).
    envs, env_of = np.unique(env_id, return_inverse=True)
    max_step = np.zeros(len(envs), np.int64)
    np.maximum.at(max_step, env_of, step)
    if episode_length is not None:
        lengths = np.full(len(envs), int(episode_length), np.int64)
    elif terminated is not None:
        lo = np.full(len(envs), np.iinfo(np.int64).max)
        hi = np.full(len(envs), -1, np.int64)
        np.minimum.at(lo, env_of[terminated], step[terminated])
        np.maximum.at(hi, env_of[terminated], step[terminated])
        ended = hi >= 0  # steps are never negative (checked above)
        if (ended & (lo != hi)).any():
            i = int(np.flatnonzero(ended & (lo != hi))[0])
            raise AssertionError(f"env_id {envs[i]}: terminated at different steps ({lo[i]} and {hi[i]})")
        late = ~ended[env_of] & (episode != 0)
        if late.any():  # no episode of this env ended, so everything must be episode 0
            raise AssertionError(
                f"env_id {env_id[late][0]}: episode index > 0 seen but no terminated transition"
            )
        lengths = np.where(ended, hi + 1, max_step + 1)
    else:
        lengths = max_step + 1
    length = lengths[env_of]
    too_far = step >= length
    if too_far.any():
        i = int(np.flatnonzero(too_far)[0])
        raise AssertionError(f"env_id {env_id[i]}: step {step[i]} seen, episode length is {length[i]}")
    if terminated is not None:
        wrong = terminated != (step == length - 1)
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            raise AssertionError(
                f"env_id {env_id[i]} agent {agent[i]}: transition (episode {episode[i]}, step {step[i]}) has "
                f"terminated={bool(terminated[i])} but episodes have {length[i]} steps"
            )

    # Sort by stream, then by position k = episode * length + step within the stream.
    k = episode * length + step
    order = np.lexsort((k, agent, env_id))
    s_env, s_agent, s_k, s_len = env_id[order], agent[order], k[order], length[order]
    starts = np.ones(len(order), bool)
    starts[1:] = (s_env[1:] != s_env[:-1]) | (s_agent[1:] != s_agent[:-1])
    step_up = np.diff(s_k, prepend=s_k[:1])
    dup = ~starts & (step_up == 0)
    gap = (starts & (s_k != 0)) | (~starts & (step_up > 1))
    bad = np.flatnonzero(dup | gap)
    if len(bad):
        i = int(bad[0])
        e, a, n = s_env[i], s_agent[i], int(s_len[i])
        name = f"env_id {e} agent {a}"
        in_stream = (s_env == e) & (s_agent == a)
        if dup[i]:
            times = int((in_stream & (s_k == s_k[i])).sum())
            raise AssertionError(
                f"{name}: duplicate transition (episode {s_k[i] // n}, step {s_k[i] % n}) seen {times} times "
                f"({int((in_stream & dup).sum())} duplicates in all)"
            )
        first = 0 if starts[i] else int(s_k[i - 1]) + 1
        last = int(s_k[i]) - 1
        raise AssertionError(
            f"{name}: missing transitions (episode {first // n}, step {first % n}) .. "
            f"(episode {last // n}, step {last % n}) [{last - first + 1} in all]"
        )

    stream_start = np.flatnonzero(starts)
    counts = np.diff(np.append(stream_start, len(order)))
    per_stream = {
        (int(s_env[i]), int(s_agent[i])): int(c) for i, c in zip(stream_start.tolist(), counts.tolist())
    }
    completed = int((counts // s_len[stream_start]).sum())
    return {
        "transitions": int(counts.sum()),
        "streams": len(per_stream),
        "envs": len(envs),
        "completed_episodes": completed,
        "per_stream": per_stream,
    }
