"""Populations of policies: an ensemble's tournament and a self-play league, over one ranked pool.

    pool.py         RankedPool: checkpoints ranked by a score, admitted and evicted by one rule
                    (the best `capacity`, or the newest); its table written as atomic JSON, drawn
                    by one renderer (`srl leaderboard RUN_DIR`)
    tournament.py   the ensemble's bookkeeping: its leaderboard (a RankedPool of evaluations), who
                    is lagging, whom it copies with which hyperparameters (no processes, no I/O)
    leaderboard.py  leaderboard.json / .csv of an ensemble run, its best entry exported for srl eval
    ensemble.py     PopulationManager: the controller's observer of an ensemble (srl.launch.observers)
    league.py       the self-play league: snapshots in a RankedPool (the newest pool_size), an
                    opponent drawn per episode, an Elo per snapshot (league.json)
    keeper.py       LeagueKeeper: the controller's observer of a league
    league_pool.py  the "league-pool" policy that plays the league's snapshots in the actors
    league_streams.py  the league's stream from the controller: its table and snapshots, which
                    the keeper takes from the learner's parameters (no file crosses between nodes)

The member kernel (one pod of an ensemble) is a worker kernel like the others: srl.workers.member.
"""
