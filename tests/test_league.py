"""The self-play league's kernel (srl.population.league) and the scripted opponents (srl.models.scripted),
by hand: snapshots and pool, the three ways to draw an opponent, Elo, the table's round trip;
connect four's lookahead on real PettingZoo boards, and against random play."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import gymnasium as gym
import numpy as np
import pytest

from srl.cli import main
from srl.evaluate import score_against
from srl.models.scripted import Connect4Lookahead, lookahead_move
from srl.population.league import START_ELO, League, expected

CONNECT4 = {"module": "pettingzoo.classic.connect_four_v3"}


def test_the_pool_keeps_the_newest_and_the_table_keeps_all():
    league = League(pool_size=2, choose="latest")
    assert league.draw() is None
    for v in (10, 20, 30):
        league.add(v, v * 100, f"checkpoints/league/v{v}.pt")
    assert league.pool == ["v20", "v30"] and set(league.snapshots) == {"v10", "v20", "v30"}
    assert {league.draw() for _ in range(5)} == {"v30"}
    with pytest.raises(ValueError, match="exists"):
        league.add(30, 0, "x")
    with pytest.raises(ValueError, match="choose"):
        League(choose="best")


def test_uniform_draws_every_pooled_snapshot_and_weighted_favours_the_ones_it_loses_to():
    uniform = League(pool_size=3, choose="uniform", seed=1)
    weighted = League(pool_size=3, choose="weighted", seed=1)
    for league in (uniform, weighted):
        for v in (1, 2, 3):
            league.add(v, 0, f"v{v}")
        for _ in range(20):  # the learner always beats v1, always loses to v3
            league.record("v1", 1)
            league.record("v3", -1)
    counts = {n: 0 for n in ("v1", "v2", "v3")}
    for _ in range(3000):
        counts[uniform.draw()] += 1
    assert all(900 < c < 1100 for c in counts.values()), counts
    counts = {n: 0 for n in ("v1", "v2", "v3")}
    for _ in range(3000):
        counts[weighted.draw()] += 1
    assert counts["v3"] > counts["v2"] > counts["v1"] > 0, counts  # beaten ones still come up


def test_scripted_opponents_stay_in_the_pool_under_negative_tags_and_are_never_the_best():
    league = League(pool_size=2, choose="weighted", seed=2)
    lookahead = league.add_scripted("connect4-lookahead")
    assert (lookahead.version, league.add_scripted("random-legal").version) == (-2, -3)
    assert league.draw() in ("connect4-lookahead", "random-legal") and league.best() is None
    for v in (10, 20, 30):
        league.add(v, 0, f"v{v}.pt")
    assert league.pool == ["connect4-lookahead", "random-legal", "v20", "v30"]
    assert (league.named(-2), league.named(-3), league.named(20), league.named(-1), league.named(5)) == \
        ("connect4-lookahead", "random-legal", "v20", None, None)
    for _ in range(30):  # the lookahead beats the learner, which beats everything else
        league.record("connect4-lookahead", -1)
        for other in ("random-legal", "v20", "v30"):
            league.record(other, 1)
    counts = dict.fromkeys(league.pool, 0)
    for _ in range(2000):
        counts[league.draw()] += 1
    assert counts["connect4-lookahead"] > 1000 and min(counts.values()) > 0, counts
    assert league.snapshots["connect4-lookahead"].elo > league.learner_elo and league.best().name == "v10"  # unbeaten
    with pytest.raises(ValueError, match="exists"):
        league.add_scripted("random-legal")


def test_elo_moves_both_sides_by_the_surprise():
    league = League(k_factor=16)
    league.add(1, 0, "v1")
    assert expected(START_ELO, START_ELO) == 0.5
    league.record("v1", 1)  # an even game won: +8 / -8
    assert league.learner_elo == pytest.approx(START_ELO + 8) and league.snapshots["v1"].elo == pytest.approx(START_ELO - 8)
    before = league.learner_elo
    league.record("v1", 0)  # a draw against a weaker side costs the stronger one
    assert league.learner_elo < before
    snap = league.snapshots["v1"]
    assert (snap.wins, snap.draws, snap.losses, snap.games) == (1, 1, 0, 2)
    league.add(2, 0, "v2")  # a new snapshot starts at the learner's rating
    assert league.snapshots["v2"].elo == pytest.approx(league.learner_elo)


def test_the_table_saves_and_loads_whole(tmp_path):
    league = League(pool_size=2, choose="weighted", seed=3)
    for v in (5, 6, 7):
        league.add(v, v, f"v{v}.pt")
    league.record("v7", -1)
    league.record("v6", 1)
    league.add_scripted("random-legal")
    league.record("random-legal", 1)
    path = tmp_path / "league.json"
    league.save(path)
    table = json.loads(path.read_text())
    assert [r["name"] for r in table["snapshots"]][0] == league.best().name  # best rated first
    again = League.load(path)
    assert again.to_json() == league.to_json()
    out = io.StringIO()  # srl leaderboard RUN_DIR prints the league of a run that has one
    with redirect_stdout(out):
        assert main(["leaderboard", str(tmp_path)]) == 0
    assert "league: learner Elo" in out.getvalue() and "v7" in out.getvalue() and "0 / 0 / 1" in out.getvalue()
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["leaderboard", str(tmp_path), "--json"]) == 0
    assert json.loads(out.getvalue()) == league.to_json()
    path.write_text("{not json")
    with pytest.raises(ValueError, match="league.json: not a league table"):
        League.load(path)


def _board(moves: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The mover's observation and mask after `moves` (columns) from the start, via PettingZoo."""
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)
    for col in moves:
        env.step(col)
    seen = env.observe(env.agent_selection)
    return seen["observation"].astype(np.float32), seen["action_mask"].astype(np.float32)


def test_lookahead_wins_when_it_can_and_blocks_when_it_must():
    rng = np.random.default_rng(0)
    # X (first player) holds columns 0-2 on the bottom row; O plays 6, 6, 5: X to move wins at 3
    board, mask = _board([0, 6, 1, 6, 2, 5])
    assert lookahead_move(board, mask, rng) == 3
    # O to move must block X's fourth in column 3
    board, mask = _board([0, 6, 1, 6, 2])
    assert lookahead_move(board, mask, rng) == 3
    # a vertical threat: X has three in column 4, O to move blocks on top
    board, mask = _board([4, 0, 4, 1, 4])
    assert lookahead_move(board, mask, rng) == 4
    # a diagonal win for the mover (at column 3, row 2) comes before blocking column 6
    board = np.zeros((6, 7, 2), np.float32)
    for r, c in ((5, 0), (4, 1), (3, 2), (4, 2), (5, 3), (3, 3)):
        board[r, c, 0] = 1
    for r, c in ((5, 1), (5, 2), (4, 3), (5, 6), (4, 6), (3, 6)):
        board[r, c, 1] = 1
    assert lookahead_move(board, np.ones(7, np.float32), rng) == 3
    board[3, 3, 0] = 0  # column 3 one lower: no diagonal, so block at 6
    assert lookahead_move(board, np.ones(7, np.float32), rng) == 6


def test_lookahead_beats_random_play_in_real_games():
    from srl.envs import make_vector_env

    space = make_vector_env("pettingzoo-aec", CONNECT4, 1, 0).observation_space
    lookahead = Connect4Lookahead(space, gym.spaces.Discrete(7), seed=0)
    score = score_against(lookahead, "pettingzoo-aec", CONNECT4, games=100, seed=3)
    assert score["win"] >= 0.8, score  # random against random wins about half
    with pytest.raises(TypeError, match="6x7x2"):
        tictactoe = make_vector_env("pettingzoo-aec", {"module": "pettingzoo.classic.tictactoe_v3"}, 1, 0)
        Connect4Lookahead(tictactoe.observation_space, gym.spaces.Discrete(9))


def test_a_second_league_is_refused_before_launch_naming_both():
    """The controller keeps one league's table; a second league used to be accepted and dropped."""
    import pytest

    from srl.config import ConfigError
    from srl.config.load import load_config

    two = ["env_kwargs.sides=[learner,league,league2]", "policies.league2={league: {of: learner}}",
           "policy_mapping.league2=league2"]  # fmt: skip
    with pytest.raises(ConfigError, match=r"field 'policies.league2.league': one league per run; policies \['league', 'league2'\]"):
        load_config("connect4-league", two)
    assert load_config("connect4-league", []).policies["league"].league is not None


def test_the_keeper_sends_a_snapshot_of_the_learners_parameters_and_a_late_joiner_asks_for_it(tmp_path, monkeypatch):
    """srl.population.league_streams, by hand on one in-process transport: the learner's service
    publishes version 5; the keeper (a subscriber of it) freezes it as snapshot v5 once the learner
    reported 5 updates, writes its file and sends it with the table; the league-pool policy of an
    acting worker loads exactly those weights. A worker that joins later has the table at the next
    refresh, asks for the snapshot it lacks, and is sent it. No file is read."""
    from types import SimpleNamespace

    import torch

    from srl.config.load import load_config
    from srl.graph import build_graph, make_policy
    from srl.graph.wiring import policy_and_params
    from srl.population import keeper as keeper_module
    from srl.population import league_streams
    from srl.population.keeper import LeagueKeeper
    from srl.streams.inline import InlineTransport
    from srl.streams.params import ParamPublisher, tensor_bytes
    from srl.streams.prefixed import PrefixedTransport
    from srl.workers.params import ParamServiceKernel

    clock = SimpleNamespace(now=100.0)
    clock.monotonic = lambda: clock.now
    monkeypatch.setattr(keeper_module, "time", clock)
    monkeypatch.setattr(league_streams, "time", clock)
    config = load_config("tictactoe-ppo", [
        "env_kwargs.sides=[learner, league]", "policy_mapping={learner: learner, league: league}",
        "policies={learner: {}, league: {league: {of: learner, snapshot_interval_updates: 5, refresh_s: 2}}}",
        f"run.run_dir={tmp_path}",
    ])  # fmt: skip
    graph = build_graph(config)
    lanes = {lane.name: lane for lane in graph.lanes}
    assert {"league.league.out", "league.league.in"} <= {s.name for s in graph.streams}
    transport = InlineTransport()
    learner_side = PrefixedTransport(transport, lanes["learner"].prefix)
    learner = make_policy(lanes["learner"].graph.config, lanes["learner"].graph.observation_space,
                          lanes["learner"].graph.action_space)
    service = ParamServiceKernel(learner_side, tensor_bytes(learner))
    keeper = LeagueKeeper(config, "league", config.policies["league"].league, graph)
    keeper.connect(transport)

    def worker():
        return policy_and_params(lanes["league"].at_run(graph), PrefixedTransport(transport, lanes["league"].prefix),
                                 torch.device("cpu"))

    pool, params = worker()
    with torch.no_grad():
        for t in learner.parameters():
            t.fill_(0.5)
    ParamPublisher(learner_side).publish(5, learner)
    keeper.poll()  # asks the service (a late joiner)
    service.poll()
    keeper.on_learner({"policy_version": 5}, env_steps=1000)
    keeper.poll()
    assert "v5" in keeper.league.snapshots and (tmp_path / "league" / "v5.pt").is_file()
    params.poll(pool)
    assert pool.league.pool == ["v5"] and pool.missing() == []
    assert all(torch.equal(a, b) for a, b in zip(pool.nets[5].state_dict().values(), learner.state_dict().values()))
    late, late_params = worker()
    late_params.poll(late)
    assert late.league.pool == [] and late.missing() == []  # nothing yet: the table goes out every refresh_s
    clock.now += 2.0
    keeper.poll()  # the table again
    late_params.poll(late)  # ... which names v5: asked for
    assert late.league.pool == ["v5"] and late.missing() == [5]
    keeper.poll()  # the answer
    late_params.poll(late)
    assert late.missing() == [] and torch.equal(late.nets[5].state_dict()[next(iter(learner.state_dict()))],
                                                next(iter(learner.state_dict().values())))
    keeper.save()
    offline, _ = worker()  # srl eval of the run: the league as it left it, from the controller's files
    offline.load_run(tmp_path)
    assert offline.league.pool == ["v5"] and torch.equal(offline.nets[5].state_dict()[next(iter(learner.state_dict()))],
                                                         next(iter(learner.state_dict().values())))
