"""srl.envs: vector envs over Gymnasium, PettingZoo and user Environments; CountingEnv's checker."""

from __future__ import annotations

import sys
from typing import ClassVar

import gymnasium as gym
import numpy as np
import pytest

from srl.api import registry
from srl.api.env import Environment, EnvStep, VectorEnv, VectorStep
from srl.envs import (
    GymEnvironment,
    GymVectorEnv,
    PettingZooEnvironment,
    SerialVectorEnv,
    describe_spaces,
    make_vector_env,
)
from srl.envs.pettingzoo_env import make_pettingzoo_env
from srl.testing import CountingEnv, check_counts

# ---------------------------------------------------------------------------------------------
# Gymnasium: GymVectorEnv and SerialVectorEnv(GymEnvironment) against raw envs, step by step.

GYM_CASES = [
    # short time limit so that both terminations and truncations happen
    pytest.param("CartPole-v1", {"max_episode_steps": 30}, np.float32, id="cartpole"),
    pytest.param("FrozenLake-v1", {"max_episode_steps": 6}, np.int64, id="frozenlake-discrete-obs"),
]


def reference_run(env_id: str, kwargs: dict, num_envs: int, seed: int, actions: np.ndarray):
    """Raw gymnasium envs stepped in a plain loop, reset by hand: what a vector env must give."""
    envs = [gym.make(env_id, **kwargs) for _ in range(num_envs)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    first = np.array(obs)
    out = []
    for a in actions:
        rows = []
        for env, act in zip(envs, a.tolist()):
            o, r, te, tr, _ = env.step(act)
            if te or tr:
                o, _ = env.reset()
            rows.append((o, r, te, tr and not te))
        out.append(rows)
    for env in envs:
        env.close()
    return first, out


def compare_with_reference(venv: VectorEnv, env_id, kwargs, obs_dtype, steps=2000, num_envs=6, seed=11):
    actions = np.random.default_rng(seed).integers(0, venv.action_space.n, size=(steps, num_envs))
    first, expected = reference_run(env_id, kwargs, num_envs, seed, actions)
    obs0 = venv.reset(seed)
    assert obs0.dtype == obs_dtype and obs0.shape[0] == num_envs
    np.testing.assert_array_equal(obs0, first.astype(obs_dtype))
    terminations = truncations = 0
    previous: VectorStep | None = None
    for t in range(steps):
        st = venv.step(actions[t])
        if previous is not None:  # preallocated: the same arrays every step
            assert st.obs is previous.obs and st.reward is previous.reward
        previous = st
        assert st.obs.dtype == obs_dtype and st.reward.dtype == np.float32
        assert st.terminated.dtype == bool and st.truncated.dtype == bool
        exp_obs = np.array([row[0] for row in expected[t]]).astype(obs_dtype)
        np.testing.assert_array_equal(st.obs, exp_obs, err_msg=f"obs at step {t}")
        np.testing.assert_array_equal(st.reward, np.array([row[1] for row in expected[t]], np.float32))
        np.testing.assert_array_equal(st.terminated, [row[2] for row in expected[t]], err_msg=f"step {t}")
        np.testing.assert_array_equal(st.truncated, [row[3] for row in expected[t]], err_msg=f"step {t}")
        terminations += int(st.terminated.sum())
        truncations += int(st.truncated.sum())
    # the comparison covered auto-resets of both kinds
    assert terminations > 10 and truncations > 10, (terminations, truncations)
    venv.close()


@pytest.mark.parametrize("env_id,kwargs,obs_dtype", GYM_CASES)
def test_gym_vector_env_matches_raw_gymnasium(env_id, kwargs, obs_dtype):
    venv = GymVectorEnv.make(env_id, 6, **kwargs)
    assert venv.agents == ("agent",) and venv.num_rows == 6
    compare_with_reference(venv, env_id, kwargs, obs_dtype)


@pytest.mark.parametrize("env_id,kwargs,obs_dtype", GYM_CASES)
def test_serial_vector_env_over_gym_environment_matches_raw_gymnasium(env_id, kwargs, obs_dtype):
    venv = SerialVectorEnv([GymEnvironment(gym.make(env_id, **kwargs)) for _ in range(6)])
    assert venv.agents == ("agent",)
    compare_with_reference(venv, env_id, kwargs, obs_dtype)


def test_make_vector_env_gymnasium_names_give_the_fast_path():
    venv = make_vector_env("CartPole-v1", {"max_episode_steps": 30}, num_envs=6, env_index_offset=0)
    assert isinstance(venv, GymVectorEnv) and venv.num_envs == 6
    compare_with_reference(venv, "CartPole-v1", {"max_episode_steps": 30}, np.float32, steps=300)
    venv = make_vector_env("gymnasium", {"id": "CartPole-v1", "max_episode_steps": 30}, 6, 0)
    assert isinstance(venv, GymVectorEnv)
    compare_with_reference(venv, "CartPole-v1", {"max_episode_steps": 30}, np.float32, steps=300)
    # the "gymnasium" factory on its own gives one dict-contract env
    single = registry.envs.get("gymnasium")(id="CartPole-v1")
    assert isinstance(single, GymEnvironment) and single.agents == ("agent",)
    single.close()


def test_gym_environment_dict_contract():
    env = GymEnvironment(gym.make("CartPole-v1"))
    raw = gym.make("CartPole-v1")
    obs = env.reset(seed=3)
    np.testing.assert_array_equal(obs["agent"], raw.reset(seed=3)[0])
    st = env.step({"agent": 1})
    o, r, te, tr, _ = raw.step(1)
    np.testing.assert_array_equal(st.obs["agent"], o)
    assert st.reward == {"agent": r} and st.terminated == {"agent": te} and st.truncated == {"agent": tr}
    env.close()


def test_box_observations_become_float32_and_the_space_says_so():
    venv = GymVectorEnv(
        [gym.wrappers.DtypeObservation(gym.make("CartPole-v1"), np.float64) for _ in range(2)]
    )
    assert venv.observation_space.dtype == np.float32
    assert venv.reset(0).dtype == np.float32
    assert venv.step(np.zeros(2, np.int64)).obs.dtype == np.float32


def test_wrong_action_shape_is_refused():
    venv = GymVectorEnv.make("CartPole-v1", 3)
    venv.reset(0)
    with pytest.raises(ValueError, match=r"\[3, \.\.\.\]"):
        venv.step(np.zeros(2, np.int64))


# ---------------------------------------------------------------------------------------------
# SerialVectorEnv rules for multi-agent envs


class _Scripted(Environment):
    """Two agents: "a" terminates on step 1 and from then on sends nothing (no obs, reward, flag);
    "b" is truncated on step 3. Observations are [episode, step]."""

    agents = ("a", "b")

    def __init__(self, b_also_terminates: bool = False) -> None:
        space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.observation_spaces = {"a": space, "b": space}
        self.action_spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)}
        self.episode = -1
        self.b_also_terminates = b_also_terminates

    def reset(self, seed=None):
        self.episode += 1
        self.t = 0
        return {a: np.array([self.episode, 0.0]) for a in self.agents}

    def step(self, actions):
        self.t += 1
        o = np.array([self.episode, self.t])
        if self.t == 1:
            return EnvStep(
                {"a": o, "b": o}, {"a": 5.0, "b": 1.0}, {"a": True, "b": False}, {"a": False, "b": False}, {}
            )
        end = self.t == 3
        return EnvStep({"b": o}, {"b": 1.0}, {"b": end and self.b_also_terminates}, {"b": end}, {})


def test_serial_agents_finishing_at_different_steps():
    venv = SerialVectorEnv([_Scripted(), _Scripted(b_also_terminates=True)])
    venv.reset(0)
    # rows: env0/a, env0/b, env1/a, env1/b
    st = venv.step(np.zeros(4, np.int64))
    np.testing.assert_array_equal(st.terminated, [True, False, True, False])
    np.testing.assert_array_equal(st.truncated, [False] * 4)
    np.testing.assert_array_equal(st.reward, [5, 1, 5, 1])
    st = venv.step(np.zeros(4, np.int64))  # "a" finished earlier and sends nothing: last obs, reward 0
    np.testing.assert_array_equal(st.obs[0], [0, 1])
    np.testing.assert_array_equal(st.obs[1], [0, 2])
    np.testing.assert_array_equal(st.reward, [0, 1, 0, 1])
    assert not st.terminated.any() and not st.truncated.any()
    st = venv.step(np.zeros(4, np.int64))  # episode over: every row done, next episode's obs
    np.testing.assert_array_equal(st.terminated, [False, False, False, True])
    # "a" reported nothing this step -> truncated; env1/b terminated and truncated -> terminated only
    np.testing.assert_array_equal(st.truncated, [True, True, True, False])
    np.testing.assert_array_equal(st.obs, [[1, 0]] * 4)
    st = venv.step(np.zeros(4, np.int64))  # the next episode starts clean
    np.testing.assert_array_equal(st.terminated, [True, False, True, False])
    np.testing.assert_array_equal(st.obs, [[1, 1]] * 4)


class _TwoSpaces(Environment):
    agents = ("left", "right")

    def __init__(self, right_obs=3, right_actions=2):
        self.observation_spaces = {
            "left": gym.spaces.Box(0, 1, (3,)),
            "right": gym.spaces.Box(0, 1, right_obs if isinstance(right_obs, tuple) else (right_obs,)),
        }
        self.action_spaces = {"left": gym.spaces.Discrete(2), "right": gym.spaces.Discrete(right_actions)}

    def reset(self, seed=None):
        raise AssertionError("not reached")

    def step(self, actions):
        raise AssertionError("not reached")


def test_serial_refuses_agents_with_different_spaces():
    with pytest.raises(ValueError, match=r"observation space.*'left'.*Box.*'right'.*\(2, 2\)"):
        SerialVectorEnv([_TwoSpaces(right_obs=(2, 2))])
    with pytest.raises(ValueError, match=r"action space.*'left'.*Discrete\(2\).*'right'.*Discrete\(5\)"):
        SerialVectorEnv([_TwoSpaces(right_actions=5)])
    with pytest.raises(ValueError, match=r"same agents"):
        SerialVectorEnv([_TwoSpaces(), CountingEnv(env_id=0)])
    SerialVectorEnv([_TwoSpaces(), _TwoSpaces()])  # equal spaces are fine


class _Lengths(_TwoSpaces):
    """left observes 3 numbers, right 5: rows padded to 5, each agent's own space kept."""

    def __init__(self):
        super().__init__(right_obs=5)

    def reset(self, seed=None):
        return {"left": np.full(3, 0.5, np.float32), "right": np.full(5, 0.25, np.float32)}


def test_serial_pads_agents_vectors_of_different_lengths_and_keeps_each_agents_space():
    venv = SerialVectorEnv([_Lengths(), _Lengths()])
    assert venv.observation_space == gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
    assert {a: o.shape for a, (o, _) in venv.agent_spaces().items()} == {"left": (3,), "right": (5,)}
    obs = venv.reset(seed=0)
    np.testing.assert_array_equal(obs[::2], [[0.5, 0.5, 0.5, 0, 0]] * 2)  # left's rows: zeros after its 3
    np.testing.assert_array_equal(obs[1::2], [[0.25] * 5] * 2)


# ---------------------------------------------------------------------------------------------
# CountingEnv and its checker


def test_counting_env_multi_agent_rows_layout():
    venv = make_vector_env(
        "counting", {"episode_length": 3, "num_agents": 2}, num_envs=3, env_index_offset=10
    )
    assert isinstance(venv, SerialVectorEnv)
    assert venv.agents == ("agent_0", "agent_1") and venv.num_rows == 6
    obs = venv.reset(seed=0)
    # row = env_index * num_agents + agent_index; env_id = env_index_offset + env_index
    expected_ids = np.array([[10, 0], [10, 1], [11, 0], [11, 1], [12, 0], [12, 1]])
    np.testing.assert_array_equal(obs[:, [0, 3]], expected_ids)
    np.testing.assert_array_equal(obs[:, 1:3], 0)
    for step in (1, 2):
        st = venv.step(np.zeros(6, np.int64))
        np.testing.assert_array_equal(st.obs[:, [0, 3]], expected_ids)
        np.testing.assert_array_equal(st.obs[:, 1:3], [[0, step]] * 6)
        np.testing.assert_array_equal(st.reward, 1.0)
        assert not st.terminated.any() and not st.truncated.any()
    st = venv.step(np.zeros(6, np.int64))  # third step ends episode 0; obs is episode 1 step 0
    assert st.terminated.all() and not st.truncated.any()
    np.testing.assert_array_equal(st.obs[:, 1:3], [[1, 0]] * 6)
    np.testing.assert_array_equal(st.obs[:, [0, 3]], expected_ids)


def collect_segments(venv: VectorEnv, T: int, num_segments: int):
    """Segments as actors cut them: [T + 1, rows, ...], the last time row repeated as the next
    segment's first."""
    obs = venv.reset(seed=0).copy()
    obs_list, term_list = [], []
    for _ in range(num_segments):
        o = np.zeros((T + 1, *obs.shape), np.float32)
        te = np.zeros((T + 1, obs.shape[0]), bool)
        o[0] = obs
        for t in range(T):
            st = venv.step(np.zeros(venv.num_rows, np.int64))
            o[t + 1] = st.obs
            te[t] = st.terminated
        obs = o[T]
        obs_list.append(o)
        term_list.append(te)
    return obs_list, term_list


@pytest.fixture
def counting_segments():
    # two "actors" with disjoint env ids; T=4 does not divide the episode length 5
    a = collect_segments(make_vector_env("counting", {"episode_length": 5, "num_agents": 2}, 3, 0), 4, 10)
    b = collect_segments(make_vector_env("counting", {"episode_length": 5, "num_agents": 2}, 2, 3), 4, 10)
    return a[0] + b[0], a[1] + b[1]


def test_check_counts_accepts_complete_samples_in_any_order(counting_segments):
    obs_list, term_list = counting_segments
    totals = check_counts(obs_list, term_list)
    assert totals["transitions"] == 10 * 4 * 6 + 10 * 4 * 4 == 400  # segments x T x rows, two actors
    assert totals["streams"] == 10 and totals["envs"] == 5
    assert totals["completed_episodes"] == 10 * (40 // 5)
    assert set(totals["per_stream"].values()) == {40}
    order = np.random.default_rng(0).permutation(len(obs_list))
    shuffled = check_counts([obs_list[i] for i in order], [term_list[i] for i in order], episode_length=5)
    assert shuffled["transitions"] == 400
    assert check_counts(obs_list)["transitions"] == 400  # without flags, length inferred
    assert check_counts(obs_list[:9])["transitions"] == 9 * 4 * 6  # a run cut short is a prefix


@pytest.mark.parametrize("with_flags", [True, False])
def test_check_counts_catches_a_dropped_segment(counting_segments, with_flags):
    obs_list, term_list = counting_segments
    dropped = obs_list[:4] + obs_list[5:]
    flags = term_list[:4] + term_list[5:] if with_flags else None
    # segment 4 of actor a held steps 16..19 of every stream of env ids 0..2
    with pytest.raises(
        AssertionError,
        match=r"env_id 0 agent 0: missing transitions \(episode 3, step 1\) "
        r"\.\. \(episode 3, step 4\) \[4 in all\]",
    ):
        check_counts(dropped, flags)


@pytest.mark.parametrize("with_flags", [True, False])
def test_check_counts_catches_a_duplicated_segment(counting_segments, with_flags):
    obs_list, term_list = counting_segments
    doubled = obs_list + [obs_list[13]]
    flags = term_list + [term_list[13]] if with_flags else None
    # segment 13 = actor b's 4th: steps 12..15 of env ids 3, 4; first duplicate (2, 2)
    with pytest.raises(
        AssertionError,
        match=r"env_id 3 agent 0: duplicate transition \(episode 2, step 2\) "
        r"seen 2 times \(4 duplicates in all\)",
    ):
        check_counts(doubled, flags)


def test_check_counts_catches_lost_episode_ends_and_wrong_flags(counting_segments):
    obs_list, term_list = counting_segments
    # one single-transition segment per (time row, row); then lose every episode's last
    # transition of env 0 agent 1
    singles = [
        o[t : t + 2, r : r + 1] for o in obs_list for t in range(len(o) - 1) for r in range(o.shape[1])
    ]
    assert check_counts(singles)["transitions"] == 400
    kept = [s for s in singles if not (s[0, 0, 0] == 0 and s[0, 0, 3] == 1 and s[0, 0, 2] == 4)]
    assert len(kept) == 400 - 8
    for length in (5, None):  # also when the length is inferred from the other streams
        with pytest.raises(
            AssertionError,
            match=r"env_id 0 agent 1: missing transitions \(episode 0, step 4\) "
            r"\.\. \(episode 0, step 4\) \[1 in all\]",
        ):
            check_counts(kept, episode_length=length)
    # a terminated flag on a transition that does not end an episode
    bad_flags = [t.copy() for t in term_list]
    assert obs_list[2][0, 5].tolist() == [2, 1, 3, 1]  # env 2 agent 1, episode 1 step 3
    bad_flags[2][0, 5] = True
    with pytest.raises(
        AssertionError,
        match=r"env_id 2 agent 1: transition \(episode 1, step 3\) has "
        r"terminated=True but episodes have 5 steps",
    ):
        check_counts(obs_list, bad_flags, episode_length=5)


# ---------------------------------------------------------------------------------------------
# PettingZoo

import pettingzoo  # noqa: E402  (srl[test] holds it)


class RelayParallelEnv(pettingzoo.ParallelEnv):
    """A small PettingZoo parallel env: "a_0" terminates on step `early`, the others are
    truncated at `max_cycles`. Observation [agent index, step, noise + last action] where noise
    is drawn at reset; reward 10 * step + agent index + action."""

    metadata: ClassVar[dict] = {"name": "relay_v0", "render_modes": []}

    def __init__(self, max_cycles: int = 4, early: int = 2) -> None:
        self.possible_agents = ["a_0", "a_1", "a_2"]
        self.observation_spaces = {
            a: gym.spaces.Box(-np.inf, np.inf, (3,), np.float32) for a in self.possible_agents
        }
        self.action_spaces = {a: gym.spaces.Discrete(3) for a in self.possible_agents}
        self.max_cycles, self.early = max_cycles, early
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return self.observation_spaces[agent]

    def action_space(self, agent):
        return self.action_spaces[agent]

    def _obs(self, agent: str, action: int) -> np.ndarray:
        return np.array([int(agent[-1]), self.t, self.noise + action], np.float32)

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.noise = float(self.rng.integers(100, 1000))
        self.agents = list(self.possible_agents)
        return {a: self._obs(a, 0) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), f"actions for {sorted(actions)}, live {self.agents}"
        self.t += 1
        obs = {a: self._obs(a, int(actions[a])) for a in self.agents}
        rewards = {a: float(10 * self.t + int(a[-1]) + int(actions[a])) for a in self.agents}
        terms = {a: a == "a_0" and self.t >= self.early for a in self.agents}
        truncs = {a: self.t >= self.max_cycles and not terms[a] for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos


def parallel_env(**kwargs):
    """Lets make_vector_env("pettingzoo", {"module": <this test module>}) build RelayParallelEnv."""
    return RelayParallelEnv(**kwargs)


def test_relay_is_a_valid_pettingzoo_parallel_env():
    from pettingzoo.test import parallel_api_test

    parallel_api_test(RelayParallelEnv(), num_cycles=20)


def test_pettingzoo_adapter_through_serial_vector_env():
    venv = make_vector_env("pettingzoo", {"module": __name__, "max_cycles": 4, "early": 2}, 2, 0)
    assert isinstance(venv, SerialVectorEnv)
    assert venv.agents == ("a_0", "a_1", "a_2") and venv.num_rows == 6
    assert venv.observation_space.shape == (3,) and venv.action_space == gym.spaces.Discrete(3)
    refs = [RelayParallelEnv(max_cycles=4, early=2) for _ in range(2)]  # raw envs side by side
    ref_obs = [r.reset(seed=5 + e)[0] for e, r in enumerate(refs)]
    obs = venv.reset(5)
    np.testing.assert_array_equal(obs, [ref_obs[e][a] for e in range(2) for a in venv.agents])
    rng = np.random.default_rng(1)
    last_obs = obs.copy()
    for episode in range(3):
        for t in range(1, 5):
            actions = rng.integers(0, 3, 6)
            st = venv.step(actions)
            for e, ref in enumerate(refs):
                live = list(ref.agents)
                r_obs, r_rew, r_term, r_trunc, _ = ref.step(
                    {a: int(actions[e * 3 + j]) for j, a in enumerate(venv.agents) if a in live}
                )
                if not ref.agents:
                    next_obs = ref.reset()[0]
                for j, a in enumerate(venv.agents):
                    row = e * 3 + j
                    where = f"episode {episode} step {t} env {e} agent {a}"
                    if a == "a_0" and t > 2:  # finished earlier: last obs, reward 0, flags as they were
                        assert st.reward[row] == 0 and st.terminated[row] and not st.truncated[row], where
                        expected_obs = last_obs[row] if t < 4 else next_obs[a]
                    else:
                        assert st.reward[row] == r_rew[a], where
                        assert st.terminated[row] == r_term[a] and st.truncated[row] == r_trunc[a], where
                        expected_obs = r_obs[a] if t < 4 else next_obs[a]
                    np.testing.assert_array_equal(st.obs[row], expected_obs, err_msg=where)
            if t == 4:  # the episode ended for both envs: every row done
                assert (st.terminated | st.truncated).all()
                np.testing.assert_array_equal(st.terminated, [True, False, False] * 2)
            last_obs = st.obs.copy()


def test_pettingzoo_missing_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "pettingzoo", None)  # import pettingzoo now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'srl\[pettingzoo\]'"):
        make_pettingzoo_env("pettingzoo.butterfly.pistonball_v6")
    with pytest.raises(ImportError, match=r"pip install 'srl\[pettingzoo\]'"):
        PettingZooEnvironment(RelayParallelEnv())


# MPE's simple_spread from mpe2 (srl[test] holds it): a real parallel env with no extra system deps
REAL_PETTINGZOO_ENV = ("mpe2.simple_spread_v3", {"max_cycles": 10})


def test_real_pettingzoo_env_through_serial_vector_env():
    module, kwargs = REAL_PETTINGZOO_ENV
    venv = make_vector_env("pettingzoo", {"module": module, **kwargs}, 2, 0)
    obs = venv.reset(0)
    assert obs.shape == (venv.num_rows, *venv.observation_space.shape)
    assert obs.dtype == np.float32
    space = venv.action_space
    space.seed(0)
    ends = 0
    for _ in range(25):
        st = venv.step(np.stack([space.sample() for _ in range(venv.num_rows)]))
        assert np.isfinite(st.obs).all() and np.isfinite(st.reward).all()
        ends += int((st.terminated | st.truncated).all())
    assert ends >= 2  # max_cycles=10: at least two whole-episode ends in 25 steps
    venv.close()


# ---------------------------------------------------------------------------------------------
# Names, factories and errors


def test_unknown_env_name_lists_names(monkeypatch):
    monkeypatch.setitem(registry.envs._entries, "my-own-env", lambda **kw: CountingEnv(env_id=0))
    with pytest.raises(registry.UnknownNameError) as err:
        make_vector_env("no-such-env", {}, 1, 0)
    message = str(err.value)
    for name in ("counting", "gymnasium", "pettingzoo", "my-own-env"):
        assert name in message
    assert "any Gymnasium id is accepted" in message
    with pytest.raises(registry.UnknownNameError, match=r"Did you mean 'CartPole-v1'"):
        make_vector_env("CartPol-v1", {}, 1, 0)


def test_env_id_only_given_to_factories_that_name_it(monkeypatch):
    seen: list[dict] = []

    def without_env_id(**kwargs):
        seen.append(kwargs)
        return CountingEnv(env_id=99, episode_length=kwargs["episode_length"])

    def with_env_id(env_id, episode_length=5):
        seen.append({"env_id": env_id})
        return CountingEnv(env_id=env_id, episode_length=episode_length)

    monkeypatch.setitem(registry.envs._entries, "no-env-id", without_env_id)
    monkeypatch.setitem(registry.envs._entries, "env-id", with_env_id)
    make_vector_env("no-env-id", {"episode_length": 3}, 2, 40)
    assert seen == [{"episode_length": 3}] * 2
    seen.clear()
    venv = make_vector_env("env-id", {}, 3, 40)
    assert seen == [{"env_id": 40}, {"env_id": 41}, {"env_id": 42}]
    np.testing.assert_array_equal(venv.reset(0)[:, 0], [40, 41, 42])
    with pytest.raises(ValueError, match="env_id"):
        make_vector_env("env-id", {"env_id": 3}, 1, 0)


def test_vector_env_factories(monkeypatch):
    calls = []

    def batched(num_envs, env_index_offset, episode_length=5):
        calls.append((num_envs, env_index_offset))
        return SerialVectorEnv([CountingEnv(env_index_offset + i, episode_length) for i in range(num_envs)])

    def fixed_size():
        return SerialVectorEnv([CountingEnv(0), CountingEnv(1)])

    monkeypatch.setitem(registry.envs._entries, "batched", batched)
    monkeypatch.setitem(registry.envs._entries, "fixed-size", fixed_size)
    venv = make_vector_env("batched", {"episode_length": 2}, 4, 8)
    assert calls == [(4, 8)] and venv.num_envs == 4
    assert make_vector_env("fixed-size", {}, 2, 0).num_envs == 2
    with pytest.raises(TypeError, match="num_envs"):
        make_vector_env("fixed-size", {}, 3, 0)


def test_describe_spaces():
    agents, obs_space, act_space = describe_spaces("CartPole-v1", {})
    assert agents == ("agent",) and obs_space.shape == (4,) and obs_space.dtype == np.float32
    assert act_space == gym.spaces.Discrete(2)
    agents, obs_space, act_space = describe_spaces("counting", {"num_agents": 3})
    assert agents == ("agent_0", "agent_1", "agent_2") and obs_space.shape == (4,)
    assert describe_spaces("gymnasium", {"id": "FrozenLake-v1"})[1] == gym.spaces.Discrete(16)
