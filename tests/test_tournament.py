"""The tournament kernel (srl.population.tournament): leaderboard and replacement policy, no processes."""

from __future__ import annotations

import math

import pytest

from srl.population.tournament import Entry, Tournament


def entry(member, ret, steps=100, lr=1e-3):
    return Entry(member, steps, ret, {"lr": lr}, f"m{member}-{steps}.pt")


def test_leaderboard_keeps_the_best_evaluations_and_names_the_evicted():
    t = Tournament(population=3, size=2, ready_evals=99)  # nobody is ever replaced here
    assert t.on_eval(entry(0, 10.0, 1)).admitted
    assert t.on_eval(entry(1, 30.0, 1)).admitted
    d = t.on_eval(entry(2, 20.0, 1))
    assert d.admitted and [e.member for e in d.evicted] == [0]
    d = t.on_eval(entry(0, 5.0, 2))
    assert not d.admitted and d.evicted == []
    assert [(e.member, e.eval_return) for e in t.entries] == [(1, 30.0), (2, 20.0)]
    d = t.on_eval(entry(2, 30.0, 2))  # a tie: the earlier entry stays ahead
    assert d.admitted and [(e.member, e.env_steps) for e in t.entries] == [(1, 1), (2, 2)]
    assert [(e.member, e.env_steps) for e in d.evicted] == [(2, 1)]
    assert not t.on_eval(entry(0, math.nan, 3)).admitted  # a broken evaluation never leads


def test_a_lagging_member_is_replaced_only_once_it_is_ready():
    t = Tournament(population=3, ready_evals=2, seed=0)
    assert t.on_eval(entry(0, 100.0, lr=0.01)).replace is None
    assert t.on_eval(entry(1, 50.0)).replace is None
    assert t.on_eval(entry(2, 10.0)).replace is None  # the worst, but only one evaluation so far
    assert t.on_eval(entry(1, 60.0, 200)).replace is None  # second eval, but member 2 is lower
    d = t.on_eval(entry(2, 20.0, 200))  # second eval and the worst: replaced by the best's copy
    assert d.replace is not None and d.replace.member == 2
    assert d.replace.source.member == 0 and d.replace.source.checkpoint == "m0-100.pt"
    assert d.replace.hparams["lr"] in (pytest.approx(0.008), pytest.approx(0.0125))
    assert t.replacements[-1]["member"] == 2 and t.replacements[-1]["source_member"] == 0
    # restarted: judged again only after ready_evals more evaluations
    assert t.members[2].evals_since_start == 0 and t.members[2].lineage == "m0@100>m2"
    assert t.on_eval(entry(2, 1.0, 300)).replace is None
    assert t.on_eval(entry(2, 1.0, 400)).replace is not None


def test_only_the_bottom_fraction_and_only_below_the_margin():
    t = Tournament(population=4, ready_evals=2, lag_fraction=0.5, margin=5.0, seed=1)
    for k, ret in enumerate((100.0, 90.0, 80.0, 97.0)):
        assert t.on_eval(entry(k, ret)).replace is None  # not ready yet
    assert not any(t.lagging(k) for k in range(4))
    for m in t.members:
        m.evals_since_start = 2
    # ranks: 80 (m2), 90 (m1) are the bottom half; 97 (m3) is not
    assert t.lagging(2) and t.lagging(1) and not t.lagging(3) and not t.lagging(0)
    t.members[1].latest = 96.0  # within the margin of the best (100): kept
    assert not t.lagging(1)
    even = Tournament(population=2, ready_evals=1)
    even.on_eval(entry(0, 500.0))
    assert even.on_eval(entry(1, 500.0)).replace is None  # all equal: nobody lags


def test_perturbation_factors_and_source_choice_cover_the_options():
    t = Tournament(population=2, ready_evals=1, exploit_top=2, factors=(0.5, 2.0), seed=3)
    t.on_eval(entry(0, 100.0, lr=1.0))
    t.on_eval(entry(0, 90.0, 200, lr=1.0))
    lrs, sources = set(), set()
    for i in range(40):
        d = t.on_eval(entry(1, 0.0, 1000 + i))
        assert d.replace is not None
        lrs.add(d.replace.hparams["lr"])
        sources.add(d.replace.source.env_steps)
    assert lrs == {0.5, 2.0} and sources == {100, 200}
    assert "gamma" not in d.replace.hparams  # only what the entry carries is perturbed


def test_table_is_json_able_and_bad_arguments_are_refused():
    import json

    t = Tournament(population=2, ready_evals=1)
    t.on_eval(entry(0, 1.0))
    t.on_eval(entry(1, 0.0))
    table = json.loads(json.dumps(t.table()))
    assert table["population"] == 2 and len(table["replacements"]) == 1
    assert table["entries"][0]["member"] == 0
    with pytest.raises(ValueError, match="population"):
        Tournament(population=0)
    with pytest.raises(ValueError, match="lag_fraction"):
        Tournament(population=2, lag_fraction=0.0)
    with pytest.raises(ValueError, match="member 5"):
        t.on_eval(entry(5, 1.0))


def test_a_restored_tournament_goes_on_from_its_table():
    """run.resume= of an ensemble: the table (leaderboard.json, through JSON) gives back the entries,
    replacements and each member's state, so the next evaluation is judged as it would have been."""
    import json

    t = Tournament(population=3, ready_evals=2, seed=0)
    for e in (entry(0, 100.0), entry(1, 50.0), entry(2, 10.0), entry(1, 60.0, 200), entry(2, 20.0, 200)):
        t.on_eval(e)
    table = json.loads(json.dumps(t.table()))
    again = Tournament(population=3, ready_evals=2, seed=0)
    again.restore(table)
    assert again.table() == t.table() and again.entries == t.entries
    assert again.members[2].lineage == "m0@100>m2" and again.members[2].evals_since_start == 0
    d = again.on_eval(entry(1, 5.0, 300))  # member 1 now lags (2 evals since its start)
    assert d.replace is not None and d.replace.member == 1 and len(again.replacements) == 2
    with pytest.raises(ValueError, match="3 members, not 4"):
        Tournament(population=4).restore(table)


def test_one_ranked_pool_keeps_the_best_or_the_newest_and_never_evicts_a_pinned_item():
    """srl.population.pool: the leaderboard's rule (the best, the earlier ahead on a tie, NaN not
    ranked) and the league's (the newest, pinned items apart and kept), and its one JSON writer."""

    from srl.population.pool import RankedPool

    best = RankedPool(2, "best", score=lambda item: item[1])
    a, b, c, d = ("a", 1.0), ("b", 3.0), ("c", 3.0), ("d", 0.5)
    assert best.admit(a) == (True, []) and best.admit(b) == (True, [])
    assert best.admit(c) == (True, [a]) and best.items == [b, c]  # b came first: it stays ahead
    assert best.admit(d) == (False, []) and best.admit(("nan", math.nan)) == (False, [])
    newest = RankedPool(2, "newest", score=lambda item: item[1], pinned=lambda item: item[0].startswith("s"))
    for item in (a, ("s1", 0.0), b, c):
        newest.admit(item)
    assert [i[0] for i in newest] == ["s1", "b", "c"] and [i[0] for i in newest.ranked()] == ["b", "c", "s1"]
    with pytest.raises(ValueError, match="capacity"):
        RankedPool(0, "best", score=lambda item: 0.0)


def test_the_pool_table_is_strict_json_with_nan_as_null(tmp_path):
    import json

    from srl.population.pool import write_json

    write_json(tmp_path / "t.json", {"entries": [{"eval_return": math.nan}]})
    assert json.loads((tmp_path / "t.json").read_text()) == {"entries": [{"eval_return": None}]}
