"""srl.evaluation: the one play loop (episodes shared over envs, seeds, rows, the legal-move mask),
the random baseline of `srl eval --against random`, and every evaluation stepping that loop."""

import io
import json
from contextlib import redirect_stdout

import gymnasium as gym
import numpy as np
import pytest
import torch

import srl.testing.counting_vector  # noqa: F401  # registers srl/CountingVector-v0
from srl.api.policy import Policy
from srl.cli import main
from srl.config.load import load_config
from srl.envs import make_vector_env
from srl.envs.central_state import AgentStateBox
from srl.evaluation import Match, Player, RandomPlayer, play
from srl.launch.run import run_experiment


class Echo(Policy):
    """Acts its rows' agent index (column 3 of a counting observation) and keeps what it saw."""

    def __init__(self, observation_space, action_space):
        super().__init__(observation_space, action_space)
        self.seen, self.ended = [], []

    def rollout(self, obs, deterministic=False):
        self.seen.append(obs.clone())
        return {"action": obs[:, 3].long()}

    def rollout_fields(self):
        return {}

    def analyze(self, obs, action):
        raise NotImplementedError

    def episodes_ended(self, done):
        self.ended.append(np.array(done))


def counting(num_envs, episode_length=5, agents=1):
    return make_vector_env("counting", {"episode_length": episode_length, "num_agents": agents}, num_envs=num_envs)


def test_play_shares_the_episodes_over_the_envs_and_counts_whole_ones():
    env = counting(3, episode_length=5)
    policy = Echo(env.observation_space, env.action_space)
    match = Match(env, [Player(policy)], episodes=7, seed=0)
    while not match.step():
        pass
    played = match.finished
    assert sorted(e.env for e in played) == [0, 0, 0, 1, 1, 2, 2]  # 7 = 3 + 2 + 2, env 0 first
    assert all(e.returns.tolist() == [5.0] for e in played)  # whole episodes: 5 steps of reward 1
    assert match.steps == 15  # env 0's three episodes; envs 1 and 2 go on, uncounted, after their two
    seen = torch.stack(policy.seen).numpy()  # [steps, envs, obs]
    assert (seen[:, :, 2] == np.arange(15)[:, None] % 5).all()  # every episode starts at step 0
    assert len(policy.ended) == 15 and sum(d.sum() for d in policy.ended) == 9  # told of every end, counted or not
    env.close()


def test_play_resets_with_the_seed_each_env_its_own():
    env = make_vector_env("srl/CountingVector-v0", {}, num_envs=2, backend="vector")
    policy = Echo(env.observation_space, env.action_space)
    played = play(env, [Player(policy)], episodes=2, seed=40)
    assert [e.env for e in played] == [0, 1]
    assert (torch.stack(policy.seen)[:, :, 0] == torch.tensor([40.0, 41.0])).all()  # env i: seed + i
    env.close()


def test_each_player_sees_and_acts_for_its_own_rows():
    env = counting(2, episode_length=3, agents=2)  # rows: env 0 agents 0, 1; env 1 agents 0, 1
    first, second = (Echo(env.observation_space, env.action_space) for _ in range(2))
    played = play(env, [Player(first, rows=[0, 2]), Player(second, rows=[1, 3])], episodes=2, seed=0)
    assert all((s[:, 3] == 0).all() for s in first.seen) and all((s[:, 3] == 1).all() for s in second.seen)
    assert all(len(d) == 2 for d in first.ended + second.ended)  # the done flags of its own rows
    assert [e.returns.tolist() for e in played] == [[3.0, 3.0], [3.0, 3.0]]  # each row's own return
    env.close()


def test_a_random_player_plays_only_legal_moves_where_the_rows_carry_a_mask():
    space = AgentStateBox(("a", "b"), own_dim=5, mask_dim=3)  # own: 2 features, then the mask of 3 moves
    assert space.action_mask(np.arange(space.shape[0])[None]).tolist() == [[2, 3, 4]]  # the one place it is cut
    obs = np.zeros((300, space.shape[0]), np.float32)
    obs[:100, 3] = 1.0  # rows 0..99: only move 1 is legal
    obs[100:200, [2, 4]] = 1.0  # rows 100..199: moves 0 and 2
    obs[200:, :2] = 1.0  # rows 200..: features but no legal move (waiting): 0
    moves = RandomPlayer(space, gym.spaces.Discrete(3), seed=0).act(obs)
    assert (moves[:100] == 1).all() and set(moves[100:200].tolist()) == {0, 2} and (moves[200:] == 0).all()


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cartpole")
    config = load_config("cartpole-ppo", ["launch.launcher=inline", "stop.total_env_steps=4000",
                                          "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off"])
    assert run_experiment(config) == 0
    return run_dir


def srl_eval(*args):
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["eval", *map(str, args)])
    return code, (json.loads(out.getvalue()) if code == 0 else None)


def test_srl_eval_against_random_plays_a_random_policy_on_the_same_episodes(cartpole_run):
    code, result = srl_eval(cartpole_run, "--against", "random", "--episodes", "4", "--seed", "9")
    assert code == 0
    _, alone = srl_eval(cartpole_run, "--episodes", "4", "--seed", "9")
    assert result["against"] == "random" and result["episodes"] == 4
    assert result["returns"] == alone["returns"] and result["return_mean"] == alone["return_mean"]  # the same episodes
    env = make_vector_env("CartPole-v1", {}, 1)
    at_random = [float(e.returns[0]) for e in play(env, [RandomPlayer(env.observation_space, env.action_space, 9)], 4, 9)]
    env.close()
    assert result["random_returns"] == at_random and result["random_return_mean"] == pytest.approx(np.mean(at_random))
    assert result["return_difference"] == pytest.approx(result["return_mean"] - result["random_return_mean"])
    assert srl_eval(cartpole_run, "--against", "heuristic")[0] == 2  # a one-line refusal, not a traceback


def test_every_evaluation_steps_the_one_play_loop(cartpole_run, monkeypatch):
    """srl eval, its random baseline, a turn-based match, the in-run evaluator and an ensemble
    member's evaluation all play through srl.evaluation's Match."""
    from srl.evaluate import evaluate_run, score_against
    from srl.workers.evaluator import EvaluatorKernel
    from srl.workers.member import make_member

    steps = []
    step = Match.step
    monkeypatch.setattr(Match, "step", lambda self: steps.append(self.env) or step(self))

    def env_steps(run):
        steps.clear()
        run()
        return len(steps)

    result = {}
    assert env_steps(lambda: result.update(evaluate_run(cartpole_run, episodes=2, seed=0))) == sum(result["returns"])
    assert env_steps(lambda: srl_eval(cartpole_run, "--against", "random", "--episodes", "1")) > 0
    tictactoe = {"module": "pettingzoo.classic.tictactoe_v3"}
    assert env_steps(lambda: score_against(None, "pettingzoo-aec", tictactoe, games=2, seed=0)) >= 5

    env = counting(1, episode_length=4)
    kernel = EvaluatorKernel([Player(Echo(env.observation_space, env.action_space))], env, seed=0, episodes=2,
                             interval_s=0.0)
    kernel.start()
    assert env_steps(lambda: kernel.poll()) == 8 and kernel.report()["eval_episode_returns"] == [4.0, 4.0]
    kernel.close()

    member = make_member(load_config("cartpole-pod-ensemble", ["pod.ensemble.eval_episodes=2",
                                                                 f"run.run_dir={cartpole_run / 'pods'}"]), 0)
    try:
        returns = []
        assert env_steps(lambda: returns.append(member.evaluate())) >= 8 and returns[0] >= 8  # CartPole lasts >= 8 steps
    finally:
        member.close()


def test_srl_eval_refuses_what_a_run_of_one_policy_cannot_do_in_one_line(cartpole_run, tmp_path, capsys):
    """One evaluation for one policy or several: a --video with --against, or a --snapshot of a run
    that played no league, is refused, not dropped unread (each was ignored before)."""
    assert srl_eval(cartpole_run, "--against", "random", "--video", tmp_path / "x.mp4")[0] == 2
    assert "--video records the run's policies playing together" in capsys.readouterr().err
    assert not (tmp_path / "x.mp4").exists()
    assert srl_eval(cartpole_run, "--snapshot", "best")[0] == 2
    assert "played no self-play league" in capsys.readouterr().err


def test_a_run_of_one_policy_is_evaluated_as_its_one_lane(cartpole_run):
    """srl eval loads every run lane by lane: one policy is the lane "", loaded from the run's own
    checkpoints into the policy build_graph checked, its figures at the top level."""
    from srl import checkpoint
    from srl.evaluation.trained import load

    run = load(cartpole_run)
    assert [lane.name for lane in run.lanes] == [""] and run.one and not run.takes_every_seat
    assert run.policies[""] is run.graph.checked.policy
    assert run.versions == {"": checkpoint.latest_meta(cartpole_run)["version"]} and run.versions[""] > 0
    _, result = srl_eval(cartpole_run, "--episodes", "2")
    assert result["policy_version"] == run.versions[""] and "policies" not in result and len(result["returns"]) == 2
