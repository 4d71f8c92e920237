"""Pod ensembles: the member kernel (evaluate, save, adopt) and whole tournament runs: members are
pod workers, restarted like any worker, and an ensemble run resumes with its leaderboard."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from srl import checkpoint
from srl.cli import main
from srl.config import ConfigError
from srl.config.load import load_config
from srl.evaluate import evaluate_run
from srl.graph import build_graph, initial_policy
from srl.launch.run import run_experiment
from srl.population import leaderboard
from srl.workers.member import make_member


def small_config(tmp_path: Path, *overrides: str):
    return load_config(
        "cartpole-pod-ensemble",
        [f"run.run_dir={tmp_path}", "monitor.display=off", "dataflow.envs_per_actor=16", "pod.ensemble.population=2",
         "pod.ensemble.eval_interval_updates=2", "pod.ensemble.eval_episodes=4", *overrides],
    )


def test_member_evaluates_saves_and_adopts_a_perturbed_copy(tmp_path):
    config = small_config(tmp_path)
    a, b = make_member(config, 0), make_member(config, 1)
    try:
        for m in (a, b):
            m.start()
            for _ in range(2):
                m.poll()
        [event] = a.take_events()
        assert a.take_events() == [] and len(b.take_events()) == 1
        assert event["member"] == 0 and event["env_steps"] == 2 * 16 * 16 and event["adoptions"] == 0
        assert event["hparams"] == {"lr": 0.01} and 1 <= event["eval_return"] <= 500
        assert a.evaluate() == event["eval_return"]  # same seed, same weights: same episodes
        saved = torch.load(io.BytesIO(event["state"]), weights_only=True)  # the report's attachment
        assert saved["hparams"] == {"lr": 0.01} and saved["env_steps"] == event["env_steps"]
        assert checkpoint.params_sha256(a.pod.policy) != checkpoint.params_sha256(b.pod.policy)

        b.adopt(event["state"], {"lr": 0.0125})
        assert checkpoint.params_sha256(a.pod.policy) == checkpoint.params_sha256(b.pod.policy)
        opt_a, opt_b = a.pod.algorithm.optimizer, b.pod.algorithm.optimizer
        assert all(torch.equal(x, y) for x, y in zip(opt_a.exp_avg_sq, opt_b.exp_avg_sq))
        assert b.pod.algorithm.config.lr == 0.0125 and b.adoptions == 1
        assert b.report()["hparams"] == {"lr": 0.0125}
        with pytest.raises(ValueError, match="gamma"):
            b.adopt(event["state"], {"gamma": 0.5})  # not a perturbed hyperparameter
    finally:
        a.close(), b.close()


def test_out_of_range_perturbations_are_not_taken(tmp_path):
    config = small_config(tmp_path, "pod.ensemble.perturb=[lr,gamma]")
    m = make_member(config, 0)
    try:
        m.start()
        m.poll(), m.poll()
        [event] = m.take_events()
        m.adopt(event["state"], {"lr": 0.02, "gamma": 0.99 * 1.25})  # gamma <= 1
        assert m.hparams() == {"lr": 0.02, "gamma": 0.99}
    finally:
        m.close()


def test_ensemble_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match="ensemble.population"):
        load_config("cartpole-pod-ensemble", ["pod.ensemble.population=0"])
    with pytest.raises(ConfigError, match=r"ensemble.perturb.*epochs.*allowed: .*lr"):
        build_graph(small_config(tmp_path, "pod.ensemble.perturb=[epochs]"))
    with pytest.raises(ConfigError, match="need pod.enabled=true"):
        build_graph(load_config("cartpole-ppo", ["pod.ensemble.population=2"]))
    graph = build_graph(small_config(tmp_path, "pod.ensemble.population=3"))
    assert [w.name for w in graph.workers] == ["pod:0", "pod:1", "pod:2"]
    assert {s.name for s in graph.streams} == {"controller.in", "control.out"}  # the one control stream pair
    # ... whose reports and adopts attach the members' weights (no run directory shared with the
    # controller: members may run on other nodes, srl.streams.control.detach)
    from srl.streams.control import MAX_ATTACHED
    from srl.streams.params import tensor_bytes

    tcp = build_graph(small_config(tmp_path, "launch.launcher=ray", "dataflow.transport=tcp"))
    for stream in tcp.streams:
        assert len(stream.frames) == 1 + MAX_ATTACHED and stream.frames[1] > 3 * sum(tensor_bytes(initial_policy(tcp)))


def test_inline_ensemble_writes_a_leaderboard(tmp_path):
    config = small_config(tmp_path, "launch.launcher=inline", "stop.max_updates=24", "stop.target_return=null")
    assert run_experiment(config) == 0
    table = leaderboard.read(tmp_path)
    assert table["population"] == 2 and 1 <= len(table["entries"]) <= 5
    returns = [e["eval_return"] for e in table["entries"]]
    assert returns == sorted(returns, reverse=True)
    kept = sorted(p.name for p in (tmp_path / leaderboard.FOLDER).iterdir())
    assert kept == sorted(Path(e["checkpoint"]).name for e in table["entries"])  # nothing else left
    csv_rows = (tmp_path / leaderboard.CSV_NAME).read_text().splitlines()
    assert csv_rows[0].startswith("rank,member,env_steps,eval_return,hp.lr") and len(csv_rows) == 1 + len(returns)


def test_ensemble_replaces_laggards_and_its_best_member_solves_cartpole(tmp_path, capsys):
    """Three pods as processes, within a fixed env-step budget (all members together): at least
    one replacement, and the best leaderboard entry solves CartPole (>= 475 on 8 greedy episodes).
    The run usually stops early because a member's last 100 training episodes reach 475."""
    config = load_config(
        "cartpole-pod-ensemble",
        [f"run.run_dir={tmp_path}", "monitor.display=off", "run.seed=1", "pod.ensemble.population=3", "stop.total_env_steps=2000000",
         "pod.ensemble.eval_interval_updates=8", "pod.ensemble.eval_episodes=8"],
    )
    assert run_experiment(config) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["error"] is None and summary["stop_reason"].startswith(("target_return", "total_env_steps"))
    table = leaderboard.read(tmp_path)
    assert len(table["replacements"]) >= 1, table
    assert table["entries"][0]["eval_return"] >= 475.0, table["entries"]
    # the best entry is the run's checkpoint: srl eval runs it
    result = evaluate_run(tmp_path, episodes=3, seed=5)
    assert result["return_mean"] >= 400.0
    assert main(["leaderboard", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "leaderboard: population 3" in out and "replacement(s)" in out
    assert main(["leaderboard", str(tmp_path / "members")]) == 2


def test_without_eval_episodes_a_member_is_scored_by_its_training_episodes(tmp_path):
    config = small_config(tmp_path, "pod.ensemble.eval_episodes=0", "pod.ensemble.eval_interval_updates=1")
    m = make_member(config, 0)
    try:
        assert m.eval_env is None
        m.start()
        returns: list[float] = []
        events: list[dict] = []
        while not events:  # no event before the first finished episode
            m.poll()
            returns += m.pod.finished_returns
            events += m.report()["evals"]  # empties the pod's lists: the member must have kept its own
        [event] = events
        assert returns and event["eval_return"] == pytest.approx(sum(returns) / len(returns))
    finally:
        m.close()


def test_an_adopt_command_is_taken_once_and_a_restarted_member_keeps_it(tmp_path):
    """The manager sends adopt n until a report shows it: a repeat changes nothing. The adopted
    weights are checkpointed at once, so a restarted member (resume) is still the copy."""
    config = small_config(tmp_path, "pod.ensemble.eval_interval_updates=1")
    a, b = make_member(config, 0), make_member(config, 1)
    try:
        for m in (a, b):
            m.start()
            m.poll()
        [event] = a.report()["evals"]
        adopt = {"type": "adopt", "adoption": 1, "state": event["state"], "hparams": {"lr": 0.008}}
        b.command(adopt)
        copied = checkpoint.params_sha256(b.pod.policy)
        assert copied == checkpoint.params_sha256(a.pod.policy) and b.report()["adoptions"] == 1
        b.poll()  # trains on: a repeat of the same adopt must not undo that
        b.command(adopt)
        assert checkpoint.params_sha256(b.pod.policy) != copied and b.adoptions == 1
        with pytest.raises(ValueError, match="unknown command"):
            b.command({"type": "explode"})
    finally:
        a.close(), b.close()
    config.run.resume = str(tmp_path)
    reborn = make_member(config, 1)
    try:
        assert reborn.adoptions == 1 and reborn.hparams() == {"lr": 0.008}
        assert checkpoint.params_sha256(reborn.pod.policy) == copied
    finally:
        reborn.close()


def test_a_killed_member_is_restarted_from_its_checkpoint_and_the_run_reaches_its_target(tmp_path):
    """Two members as processes of the local launcher; one is SIGKILLed once it has a checkpoint.
    The supervisor restarts it like any worker (counted in the summary and metrics), it resumes from
    its own checkpoint, and a member's last 100 training episodes still reach 475."""
    import random
    import threading
    import time

    from test_faults import kill_now

    config = load_config(
        "cartpole-pod-ensemble",
        [f"run.run_dir={tmp_path}", "monitor.display=off", "run.seed=1", "launch.launcher=local", "pod.ensemble.population=2",
         "stop.total_env_steps=2000000", "run.checkpoint_interval_s=1", "pod.ensemble.eval_episodes=8"],
    )
    killed: list[str | None] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        meta = tmp_path / "members" / "m1" / "checkpoints" / checkpoint.LATEST
        while not meta.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        killed.append(kill_now(os.getpid(), ("pod",), random.Random(1)))

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    assert run_experiment(config) == 0
    thread.join()
    assert killed and killed[0] in ("srl:cartpole-pod-ensemble:pod:0", "srl:cartpole-pod-ensemble:pod:1"), killed
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["restarts"] == {killed[0].split(":", 2)[2]: 1}, summary
    assert summary["stop_reason"].startswith("target_return 475.0 reached by pod:"), summary
    last = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["restarts"] == 1
    assert leaderboard.read(tmp_path)["entries"]


def test_an_ensemble_run_resumed_from_its_directory_continues_its_leaderboard(tmp_path):
    """Stopped after 16 updates, resumed for 16 more: every entry of the first launch is still
    there (a leaderboard of 1000 evicts none), new ones were added past each member's steps, the
    members' versions went on from their checkpoints, and the replacements so far are kept."""
    first = small_config(tmp_path, "launch.launcher=inline", "stop.max_updates=16", "stop.target_return=null",
                         "pod.ensemble.leaderboard_size=1000", "pod.ensemble.ready_evals=1")
    assert run_experiment(first) == 0
    before = leaderboard.read(tmp_path)
    versions = [checkpoint.latest_meta(tmp_path / "members" / f"m{k}")["version"] for k in range(2)]
    assert len(before["entries"]) >= 4 and min(versions) >= 4

    resumed = load_config("cartpole-pod-ensemble", [f"run.resume={tmp_path}", "stop.max_updates=16"])
    assert resumed.run.run_dir == str(tmp_path) and resumed.pod.ensemble.leaderboard_size == 1000
    assert run_experiment(resumed) == 0
    after = leaderboard.read(tmp_path)
    old = {(e["member"], e["env_steps"]) for e in before["entries"]}
    assert old < {(e["member"], e["env_steps"]) for e in after["entries"]}
    assert after["replacements"][: len(before["replacements"])] == before["replacements"]
    for k in range(2):  # each member went on from its checkpoint's steps, not from 0
        old_steps = max(steps for member, steps in old if member == k)
        new_steps = [e["env_steps"] for e in after["entries"] if e["member"] == k and (k, e["env_steps"]) not in old]
        assert new_steps and min(new_steps) > old_steps, (k, old_steps, new_steps)
        assert checkpoint.latest_meta(tmp_path / "members" / f"m{k}")["version"] > versions[k]
    kept = sorted(p.name for p in (tmp_path / leaderboard.FOLDER).iterdir())
    assert kept == sorted(Path(e["checkpoint"]).name for e in after["entries"])


def test_resuming_an_ensemble_with_another_population_is_a_config_error(tmp_path):
    assert run_experiment(small_config(tmp_path, "launch.launcher=inline", "stop.max_updates=4", "stop.target_return=null")) == 0
    with pytest.raises(ConfigError, match="ensemble.population.*2 members, not 3"):
        run_experiment(load_config("cartpole-pod-ensemble", [f"run.resume={tmp_path}", "pod.ensemble.population=3"]))


def test_resuming_an_ensemble_whose_member_lost_its_checkpoints_is_refused_unless_start_fresh(tmp_path, capsys):
    """A member without checkpoints started over beside the others without a word. Now the launch is
    refused naming that member's directory; with start_fresh it alone trains from scratch."""
    assert run_experiment(small_config(tmp_path, "launch.launcher=inline", "stop.max_updates=4", "stop.target_return=null")) == 0
    kept, lost_version = (checkpoint.latest_meta(tmp_path / "members" / f"m{k}")["version"] for k in range(2))
    lost = tmp_path / "members" / "m1" / "checkpoints"
    shutil.rmtree(lost)
    with pytest.raises(ConfigError, match=f"field 'run.resume': no checkpoint in {lost} .*it is missing") as refused:
        run_experiment(load_config("cartpole-pod-ensemble", [f"run.resume={tmp_path}"]))
    assert "members/m0" not in str(refused.value) and not lost.exists()
    capsys.readouterr()
    fresh = load_config("cartpole-pod-ensemble", [f"run.resume={tmp_path}", "run.if_no_checkpoint=start_fresh",
                                                  "stop.max_updates=4"])
    assert run_experiment(fresh) == 0
    err = capsys.readouterr().err
    assert f"srl: run.if_no_checkpoint=start_fresh: no checkpoint in {lost}" in err
    # m0 goes on from its checkpoint, m1 alone from scratch (how far each gets is the stop's timing)
    assert err.count(f"resumed from checkpoint version {kept}") == 1 and err.count("starts from scratch") == 1, err
    versions = [checkpoint.latest_meta(tmp_path / "members" / f"m{k}")["version"] for k in range(2)]
    assert versions[0] > kept and versions[1] > 0, (kept, lost_version, versions)


def test_a_restarted_members_second_evaluation_at_the_same_env_steps_keeps_the_first_entrys_file(tmp_path):
    """A member restarted from its checkpoint evaluates again at the env steps of its first life's
    evaluations. The second file must not take the first one's name: when it is not admitted, its
    removal took the entry's file with it, and an adopt of that entry found no file."""
    from srl.population.ensemble import PopulationManager

    config = load_config("cartpole-pod-ensemble", [f"run.run_dir={tmp_path}", "pod.ensemble.population=2",
                                                   "pod.ensemble.leaderboard_size=1"])
    manager = PopulationManager(config, started_s=0.0)

    def evaluation(eval_return: float) -> dict:
        packed = io.BytesIO()
        torch.save({"eval_return": eval_return}, packed)
        return {"member": 0, "env_steps": 4096, "eval_return": eval_return, "hparams": {"lr": 1e-3},
                "state": packed.getvalue(), "adoptions": 0}

    manager.on_eval(0, evaluation(300.0))  # admitted
    manager.on_eval(0, evaluation(100.0))  # the restarted life, same env steps: not admitted
    (entry,) = leaderboard.read(tmp_path)["entries"]
    assert entry["eval_return"] == 300.0
    assert torch.load(entry["checkpoint"], weights_only=True) == {"eval_return": 300.0}


def test_a_reports_bytes_travel_as_frames_and_a_frame_no_one_names_is_malformed():
    """srl.streams.control: an ensemble member's weights go with its report (and the manager's with
    an adopt) as frames after the JSON one, put back where they were; a message whose JSON does not
    name each extra frame once is dropped and counted, never read."""
    from srl.launch.reports import ReportCheck
    from srl.streams.control import CONTROLLER_IN, Kind, Role, WorkerLink, decode_report, report_schema
    from srl.streams.inline import InlineTransport
    from srl.streams.schema import checked

    transport = InlineTransport()
    inbox = transport.receiver(CONTROLLER_IN)
    link = WorkerLink(transport, Role.POD, 0)
    event = {"env_steps": 4, "eval_return": 1.5, "hparams": {"lr": 0.1}, "state": b"\x00weights\xff", "adoptions": 0}
    link.send(Kind.REPORT, {"evals": [event]})
    [message] = inbox.recv_all()
    assert len(message.frames) == 2 and b"weights" not in bytes(message.frames[0])
    assert decode_report(message)[3] == {"evals": [event]}
    check = ReportCheck([(Role.POD, 0)])
    reports = checked(transport, inbox, CONTROLLER_IN, report_schema(check))
    sender = transport.sender(CONTROLLER_IN)
    pod = {"env_steps": 0, "episode_returns": [], "episode_lengths": [], "segments_dropped": 0, "updates": 0}
    body = json.dumps({**pod, "evals": [{**event, "state": {"$attached": 0}}]}).encode()
    sender.send((Kind.REPORT, Role.POD, 0), [body, b"weights"])  # well formed
    sender.send((Kind.REPORT, Role.POD, 0), [body])  # names a frame it has not
    sender.send((Kind.REPORT, Role.POD, 0), [json.dumps(pod).encode(), b"stray"])  # a frame it does not name
    escaped = body.replace(b'"$attached"', b'"\\u0024attached"')  # the same JSON, a stand-in not put back
    sender.send((Kind.REPORT, Role.POD, 0), [escaped])
    [taken] = reports.recv_all()
    assert check.payload(taken)["evals"][0]["state"] == b"weights"
    assert transport.take_rejected() == {CONTROLLER_IN: 3}
