"""Nothing forged is accepted, nothing good is lost: NaN / inf from an env or an update, run
directories owned by one run, and damaged or foreign files in them.

Real short runs on the "poisoned" env and the "nan-ppo" algorithm (tests/poisoned_env.py); CLI
errors are checked to be one line with no traceback; JSON outputs are parsed strictly (Python's
json.loads takes NaN and Infinity, which no other parser does)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import poisoned_env  # noqa: F401  (registers "poisoned" and "nan-ppo")
import pytest
import recording  # noqa: F401  (registers the "record" algorithm)
import torch

from srl import checkpoint
from srl.config import ConfigError
from srl.config.checks import build_config
from srl.config.load import load_config
from srl.faults import first_nonfinite
from srl.launch.run import run_experiment
from srl.launch.rundir import claim_run_dir

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def strict(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def summary_of(run_dir: Path) -> dict:
    return strict((run_dir / "summary.json").read_text())


def metrics_of(run_dir: Path) -> list[dict]:
    return [strict(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def srl(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    return subprocess.run([sys.executable, "-m", "srl.cli", *args], capture_output=True, text=True, env=env,
                          cwd=TESTS, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess, *words: str) -> str:
    """The failed command's stderr: one 'srl: ...' line naming `words`, no traceback."""
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("srl: ") and "skipped" not in line]
    assert len(errors) == 1, proc.stderr
    for word in words:
        assert word in errors[0], (word, errors[0])
    return errors[0]


def poisoned(run_dir: Path, *overrides: str, algorithm: str = "ppo", **env_kwargs) -> list[str]:
    kwargs = {"poison_env_id": 3, "at_step": 30, **env_kwargs}
    return ["modules=poisoned_env", "env=poisoned", f"env_kwargs={json.dumps(kwargs)}", f"algorithm={algorithm}",
            "launch.launcher=inline", "dataflow.envs_per_actor=4", "dataflow.ring_splits=2", "dataflow.sample_length=8", "monitor.display=off",
            "stop.total_env_steps=1500", "stop.target_return=null", "monitor.learning_curve=false", f"run.run_dir={run_dir}", *overrides]


def saved_states(run_dir: Path) -> list[dict]:
    return [torch.load(p, weights_only=True) for p in sorted(checkpoint.checkpoint_dir(run_dir).glob("ckpt-*.pt"))]


def short_run(run_dir: Path, *overrides: str) -> dict:
    base = ["launch.launcher=inline", "stop.target_return=null", f"run.run_dir={run_dir}", "monitor.display=off", "monitor.learning_curve=false",
            "run.checkpoint_interval_s=0.2", "stop.total_env_steps=3000"]
    assert run_experiment(load_config("cartpole-ppo", [*base, *overrides])) == 0
    return summary_of(run_dir)


# ------------------------------------------------------------------ NaN / inf from an environment


@pytest.mark.parametrize("field, value", [("obs", "nan"), ("reward", "inf")])
def test_a_nonfinite_env_value_ends_the_run_naming_env_index_and_field(run_dir, field, value):
    """dataflow.nonfinite_env=error (the default), over real processes: the actor's halt ends the run at
    once (no restart loop), with a line naming the env, its index and the field."""
    config = load_config("cartpole-ppo", poisoned(run_dir, "launch.launcher=local", field=field, value=float(value)))
    assert run_experiment(config) == 1
    summary = summary_of(run_dir)
    error = summary["error"]
    shown = {"obs": "observation", "reward": "reward"}[field]
    for part in ("env 'poisoned'", "env index 3", f"non-finite {shown} ({value})", "dataflow.nonfinite_env=skip_episode"):
        assert part in error, error
    assert "Traceback" not in error and summary["restarts"] == {}, summary
    assert all(first_nonfinite(s) is None for s in saved_states(run_dir))


def test_skip_episode_keeps_every_nonfinite_value_out_of_the_segments(run_dir):
    """The trainer's batches (recorded) hold no NaN: the poisoned step's reward is 0, its row is cut
    as truncated, the next observation is the restarted env's first; the episode is not a return."""
    overrides = poisoned(run_dir, "dataflow.nonfinite_env=skip_episode", f"algo={json.dumps({'out_dir': str(run_dir / 'b')})}",
                         algorithm="record", field="reward", value=float("inf"), episode_length=8, at_step=13)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    from recording import load_batches

    batches = load_batches(run_dir / "b")
    assert batches
    for b in batches:
        for name in ("obs", "reward"):
            assert np.isfinite(b[name]).all(), name
    # env 3 is row 1 of ring group 1; its step 13 is step 5 of its second episode, cut there
    cut = [(b["truncated"][:-1] & (b["reward"][:-1] == 0)) for b in batches]
    assert sum(int(c.sum()) for c in cut) == 1
    # the restarted env's next observation is an episode's first (t = 0)
    b, (t, row) = next((b, np.argwhere(c)[0]) for b, c in zip(batches, cut) if c.any())
    assert (b["obs"][t + 1, row] == 0).all()
    summary = summary_of(run_dir)
    assert summary["nonfinite_episodes_skipped"] == 1 and summary["error"] is None
    assert metrics_of(run_dir)[-1]["nonfinite_episodes_skipped"] == 1
    assert summary["episode_return_mean"] == 8.0  # every counted episode is whole: 8 steps of reward 1


def test_skip_episode_trains_on_with_finite_weights(run_dir):
    overrides = poisoned(run_dir, "dataflow.nonfinite_env=skip_episode", field="obs", value=float("nan"))
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    summary = summary_of(run_dir)
    assert summary["nonfinite_episodes_skipped"] == 1 and summary["updates"] > 0
    assert summary["nonfinite_updates_skipped"] == 0
    states = saved_states(run_dir)
    assert states and all(first_nonfinite(s) is None for s in states)
    metrics_of(run_dir)  # strict JSON


def test_mending_a_step_cuts_every_agent_of_the_bad_env_and_keeps_a_whole_episode():
    """Two envs of two agents. Env 0: agent 1's reward is inf mid-episode, so both its rows are cut
    and dropped. Env 1: its episode ended with finite rewards and only the next episode's first
    observation is NaN: that episode is whole and counted; the env restarts all the same."""
    from srl.workers.nonfinite import EnvGuard

    class Env:
        reset = []

        def reset_env(self, e):
            self.reset.append(e)
            return np.full((2, 3), 7.0, np.float32)

    guard = EnvGuard("skip_episode", "two-agents", first_env_index=4, agents=2, actor=0)
    obs = np.zeros((4, 3), np.float32)
    obs[3, 2] = np.nan
    reward = np.array([1.0, np.inf, 1.0, 1.0], np.float32)
    terminated = np.array([False, False, True, True])
    truncated = np.zeros(4, bool)
    rows = guard.bad_rows(obs, reward)
    assert rows.tolist() == [True, True, True, True]
    env = Env()
    dropped = guard.mend(env, rows, reward, terminated, truncated, obs)
    assert dropped.tolist() == [True, True, False, False]
    assert reward.tolist() == [1.0, 0.0, 1.0, 1.0] and truncated.tolist() == [True, True, False, False]
    assert terminated.tolist() == [False, False, True, True] and env.reset == [0, 1] and (obs == 7).all()
    assert guard.bad_rows(np.zeros((4, 3), np.float32), np.ones(4, np.float32)) is None
    huge = np.full((4, 3), 3e38, np.float32)  # finite, but their sum is not: looked at, and fine
    assert guard.bad_rows(huge, np.ones(4, np.float32)) is None
    huge[1, 0] = -np.inf
    assert guard.bad_rows(huge, np.ones(4, np.float32)).tolist() == [True, True, False, False]
    with pytest.raises(Exception, match=r"'two-agents' returned a non-finite reward \(inf\) at env index 4"):
        EnvGuard("error", "two-agents", 4, 2, 0).mend(env, rows, np.array([1, np.inf, 1, 1], np.float32),
                                                      terminated, truncated, obs)


def test_an_env_that_restarts_nonfinite_ends_the_run_even_when_skipping(run_dir):
    overrides = poisoned(run_dir, "dataflow.nonfinite_env=skip_episode", poison_resets=True)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 1
    assert "right after a reset" in summary_of(run_dir)["error"]


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_an_env_that_keeps_poisoning_ends_the_run_saying_so(run_dir, launcher, capfd):
    """An env NaN on every step (env 3 of 4): before, skip_episode skipped its every episode with no
    line and exit 0 (229,760 skips in 20 s); now the first skip gets a line, the count is on the
    console and in summary.json, and once more than dataflow.max_skipped_fraction (0.5) of the
    actor's last 100 episodes were skipped the run ends with one line naming the env and the
    setting, at a few hundred env steps of its 20,000."""
    overrides = poisoned(run_dir, "dataflow.nonfinite_env=skip_episode", f"launch.launcher={launcher}",
                         "stop.total_env_steps=20000", at_step=1, poison_every=1)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 1
    err = capfd.readouterr().err
    summary = summary_of(run_dir)
    skipped = summary["nonfinite_episodes_skipped"]
    assert 50 < skipped <= 110 and summary["env_steps"] < 2000, summary
    first = [line for line in err.splitlines() if "its episode is skipped" in line]
    assert len(first) == 1 and "env 'poisoned' returned a non-finite observation (nan) at env index 3" in first[0], err
    assert f"nonfinite_episodes_skipped={skipped}" in err.splitlines()[-1], err  # the last line: the count
    halt = [line for line in summary["error"].splitlines() if "dataflow.max_skipped_fraction=0.5" in line]
    assert len(halt) == 1 and halt[0].startswith("env 'poisoned' returned a NaN or an infinity in "), summary["error"]
    assert "of the last 100 episodes of actor 0" in halt[0] and halt[0] in err, err
    assert summary["restarts"] == {} and "Traceback" not in summary["error"]


def test_an_env_that_poisons_rarely_runs_on_counting(run_dir, capfd):
    """Env 3 of 4 NaN on every 50th step (one of its ~6 episodes, ~4 % of the actor's): below the
    limit, the run goes to its budget, counting; the first skip and the count are on the console."""
    overrides = poisoned(run_dir, "dataflow.nonfinite_env=skip_episode", "stop.total_env_steps=3000", poison_every=50)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    err = capfd.readouterr().err
    summary = summary_of(run_dir)
    skipped = summary["nonfinite_episodes_skipped"]
    assert summary["error"] is None and summary["stop_reason"].startswith("total_env_steps"), summary
    assert 3 <= skipped <= summary["env_steps"] // 4 // 50 + 1, summary  # env 3 steps a quarter of them
    assert len([line for line in err.splitlines() if "its episode is skipped" in line]) == 1, err
    assert "episode(s) skipped so far" in err and f"nonfinite_episodes_skipped={skipped}" in err.splitlines()[-1], err


def test_the_skip_limit_holds_the_last_100_episode_ends():
    """SkipLimit by hand: steps of (skipped, finished) episode ends; the window is the newest whole
    steps holding 100 ends; more than max_fraction of them skipped ends the run, never before 100."""
    from srl.faults import RunHalted
    from srl.workers.nonfinite import SkipLimit

    limit = SkipLimit("poisoned", 2, 0.5)
    limit.on_first("env 'poisoned' returned a non-finite reward (inf) at env index 9 (actor 2)")
    for _ in range(9):
        limit.step(10, 0)  # 90 of 90 skipped: not judged before 100 ends
    limit.step(0, 0)  # nothing ended: nothing kept
    with pytest.raises(RunHalted, match=r"^env 'poisoned' returned a NaN or an infinity in 90 of the last 101 "
                                        r"episodes of actor 2, more than dataflow.max_skipped_fraction=0.5 .*"
                                        r"The first: env 'poisoned' returned a non-finite reward \(inf\) at env index 9"):
        limit.step(0, 11)
    sliding = SkipLimit("poisoned", 0, 0.5)
    for _ in range(5):
        sliding.step(10, 0)
    sliding.step(0, 200)  # the skips leave the window: the 200 finished hold it
    for _ in range(9):
        sliding.step(10, 0)  # 90 of 290
    with pytest.raises(RunHalted, match="in 100 of the last 100 episodes"):
        sliding.step(10, 0)  # the 200 leave in turn
    never = SkipLimit("poisoned", 0, 1.0)  # 1: more than all of them, never
    for _ in range(50):
        never.step(10, 0)
    half = SkipLimit("poisoned", 0, 0.5)
    for _ in range(100):
        half.step(1, 1)  # exactly half: not more
    with pytest.raises(ConfigError, match="max_skipped_fraction"):
        load_config("cartpole-ppo", ["dataflow.max_skipped_fraction=0"])


def test_a_pods_rollout_with_a_nan_ends_the_run_naming_the_env_index():
    from srl.faults import RunHalted
    from srl.workers.pod import make_pod

    kernel = make_pod("batched-cartpole", num_envs=8, sample_length=4, total_env_steps=10_000)
    step, calls = kernel.env.step, []

    def poisoned_step(action):
        obs, reward, terminated, truncated = step(action)
        calls.append(1)
        if len(calls) == 6:
            reward = reward.clone()
            reward[5] = float("inf")
        return obs, reward, terminated, truncated

    kernel.env.step = poisoned_step
    kernel.start()
    kernel.poll()  # steps 1-4: finite, one update
    kernel.poll()  # steps 5-8: found on the device, not trained on; read at the report (no sync per iteration)
    assert kernel.report()["policy_version"] == 1  # the poisoned rollout was not trained on
    with pytest.raises(RunHalted, match="'batched-cartpole' returned a non-finite reward at env index 5"):
        kernel.poll()
    assert kernel.version == 1
    kernel.close()


def test_pods_cannot_skip_episodes():
    with pytest.raises(ConfigError, match="nonfinite_env"):
        from srl.graph import build_graph

        build_graph(load_config("cartpole-pod", ["dataflow.nonfinite_env=skip_episode"]))


# ------------------------------------------------------------------ non-finite updates


def test_a_nan_loss_is_undone_and_counted(run_dir):
    overrides = poisoned(run_dir, "algo.nan_updates=[2, 3]", "run.checkpoint_interval_s=0.2", algorithm="nan-ppo",
                         poison_env_id=-1)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    summary = summary_of(run_dir)
    assert summary["nonfinite_updates_skipped"] == 2, summary
    assert summary["policy_version"] == summary["updates"] > 2
    states = saved_states(run_dir)
    assert states and all(first_nonfinite(s) is None for s in states)
    rows = metrics_of(run_dir)
    assert rows[-1]["nonfinite_updates_skipped"] == 2


@pytest.mark.parametrize("launcher", ["inline", "local"])
def test_an_undone_update_in_lock_step_still_makes_a_version(run_dir, launcher):
    """Lock step: each actor waits for the version after its last segment. An undone update once
    made none, and the run waited for good (at 100 env steps, inline and local alike); now its
    version is the unchanged weights."""
    overrides = poisoned(run_dir, "algo.nan_updates=[2, 3]", "run.deterministic=true", f"launch.launcher={launcher}",
                         algorithm="nan-ppo", poison_env_id=-1)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 0
    summary = summary_of(run_dir)
    assert summary["stop_reason"].startswith("total_env_steps") and summary["nonfinite_updates_skipped"] == 2, summary
    assert summary["policy_version"] == summary["updates"] + 2


def test_repeated_nan_updates_end_the_run_and_keep_the_good_checkpoints(run_dir):
    overrides = poisoned(run_dir, f"algo.nan_updates={list(range(3, 1000))}", "launch.max_nonfinite_updates=2",
                         "run.checkpoint_interval_s=0.01", algorithm="nan-ppo", poison_env_id=-1)
    assert run_experiment(load_config("cartpole-ppo", overrides)) == 1
    summary = summary_of(run_dir)
    assert "3 updates in a row" in summary["error"] and "launch.max_nonfinite_updates=2" in summary["error"], summary
    states = saved_states(run_dir)
    assert states and all(first_nonfinite(s) is None for s in states)
    assert max(s["version"] for s in states) == 3  # the last good version


def test_a_checkpoint_with_nonfinite_parameters_is_never_written(tmp_path, capsys):
    policy = torch.nn.Linear(3, 2)
    assert checkpoint.save(tmp_path, 1, 10, policy, {}) is not None
    with torch.no_grad():
        policy.weight[0, 0] = float("nan")
    assert checkpoint.save(tmp_path, 2, 20, policy, {}) is None
    assert "checkpoint of version 2 not written: policy.weight is not finite" in capsys.readouterr().err
    assert checkpoint.latest_meta(tmp_path)["version"] == 1
    assert [p.name for p in checkpoint.checkpoint_dir(tmp_path).glob("ckpt-*.pt")] == ["ckpt-00000001.pt"]


def test_srl_eval_refuses_a_nonfinite_checkpoint(run_dir):
    short_run(run_dir)
    newest = checkpoint.load_latest(run_dir)
    poisoned_state = {**newest, "version": newest["version"] + 1}
    poisoned_state["policy"] = {k: v.clone().fill_(float("nan")) for k, v in newest["policy"].items()}
    poisoned_state.pop("path")
    # as an srl without the guard wrote them: NaN weights, latest.json pointing at them
    torch.save(poisoned_state, checkpoint.checkpoint_dir(run_dir) / f"ckpt-{poisoned_state['version']:08d}.pt")
    (checkpoint.checkpoint_dir(run_dir) / "latest.json").write_text(
        json.dumps({"path": f"ckpt-{poisoned_state['version']:08d}.pt"}))
    proc = srl("eval", str(run_dir), "--episodes", "1")
    assert proc.returncode == 0, proc.stderr
    assert strict(proc.stdout.splitlines()[-1])["policy_version"] == newest["version"]
    assert "is not finite" in proc.stderr
    for path in checkpoint.checkpoint_dir(run_dir).glob("ckpt-*.pt"):  # only NaN ones left
        if path.name != f"ckpt-{poisoned_state['version']:08d}.pt":
            path.unlink()
    one_line_error(srl("eval", str(run_dir)), "no usable checkpoint", "is not finite")


# ------------------------------------------------------------------ run directories owned by one run


def test_a_used_run_dir_is_refused_unless_resumed(run_dir):
    first = short_run(run_dir)
    one_line_error(srl("run", "cartpole-ppo", f"run.run_dir={run_dir}", "launch.launcher=inline"), str(run_dir),
                   "already holds a run", f"run.resume={run_dir}")
    resumed = load_config("cartpole-ppo", [f"run.resume={run_dir}", "stop.total_env_steps=6000"])
    assert run_experiment(resumed) == 0
    second = summary_of(run_dir)
    assert second["run_id"] == first["run_id"] and (first["launch"], second["launch"]) == (1, 2)
    assert [r["launch"] for r in metrics_of(run_dir)][0] == 1 and metrics_of(run_dir)[-1]["launch"] == 2
    assert {s["run_id"] for s in saved_states(run_dir)} == {first["run_id"]}
    elsewhere = run_dir.parent / "elsewhere"  # would train afresh there while saying it resumed
    one_line_error(srl("run", "cartpole-ppo", f"run.resume={run_dir}", f"run.run_dir={elsewhere}"), "continues that run")


def test_a_resume_without_checkpoints_is_refused_unless_asked_to_start_fresh(run_dir, capsys):
    """checkpoints/ gone: the resume trained from scratch without a word. Now refused on one line
    naming what it looked for, before anything starts; run.if_no_checkpoint=start_fresh trains from
    scratch in the run's directory, as the run's next launch, and a later resume does not inherit it."""
    first = short_run(run_dir)
    shutil.rmtree(checkpoint.checkpoint_dir(run_dir))
    rows = len(metrics_of(run_dir))
    line = one_line_error(srl("run", "cartpole-ppo", f"run.resume={run_dir}", "launch.launcher=inline"),
                          "field 'run.resume'", f"no checkpoint in {run_dir / 'checkpoints'}", "latest.json",
                          "ckpt-<version>.pt", "it is missing", "run.if_no_checkpoint=start_fresh")
    assert line.count(str(run_dir)) == 1, line
    assert len(metrics_of(run_dir)) == rows and not checkpoint.checkpoint_dir(run_dir).exists(), "nothing started"
    assert json.loads((run_dir / "run.lock").read_text())["launch"] == 1  # a refused launch is not one

    capsys.readouterr()
    fresh = load_config("cartpole-ppo", [f"run.resume={run_dir}", "run.if_no_checkpoint=start_fresh",
                                         "stop.total_env_steps=3000"])
    assert run_experiment(fresh) == 0
    err = capsys.readouterr().err
    assert f"srl: run.if_no_checkpoint=start_fresh: no checkpoint in {run_dir / 'checkpoints'}" in err, err
    assert "training from scratch" in err and "trainer starts from scratch" in err
    second = summary_of(run_dir)
    assert (second["run_id"], second["launch"]) == (first["run_id"], 2)
    launched = [r for r in metrics_of(run_dir) if r["launch"] == 2]
    # the policy's count starts from 0, not from the lost checkpoint; the run's goes on (srl.launch.launches):
    # every env step of the first launch is re-done
    # (launch 2's own count at its first row is not comparable with launch 1's total: both depend on
    # when the reports came; on afa7bb5 and after, an idle run gave 6,656 against 5,216)
    assert launched and all(r["env_steps_redone"] == first["env_steps"] for r in launched), "counted from 0"
    assert checkpoint.load_latest(run_dir)["run_id"] == first["run_id"]
    again = load_config("cartpole-ppo", [f"run.resume={run_dir}"])  # its config.yaml says start_fresh
    assert again.run.if_no_checkpoint == "refuse"
    with pytest.raises(ConfigError, match="field 'run.if_no_checkpoint': start_fresh applies to run.resume="):
        load_config("cartpole-ppo", ["run.if_no_checkpoint=start_fresh"])


def test_start_fresh_sets_unusable_checkpoints_aside(run_dir, capsys):
    """Every checkpoint damaged: refused as before (a restarted trainer's first saves would rotate them
    away); start_fresh moves them to checkpoints/unusable-launch2/, where they are kept and no
    loading or rotation reaches them, and trains from scratch."""
    short_run(run_dir)
    folder = checkpoint.checkpoint_dir(run_dir)
    damaged = sorted(p.name for p in folder.glob("ckpt-*.pt"))
    for name in damaged:
        (folder / name).write_bytes(b"PK\x03\x04 truncated")
    one_line_error(srl("run", "cartpole-ppo", f"run.resume={run_dir}", "launch.launcher=inline"),
                   f"no usable checkpoint in {folder}", "unreadable", "run.if_no_checkpoint=start_fresh",
                   "checkpoints/unusable-launch2/")
    assert sorted(p.name for p in folder.glob("ckpt-*.pt")) == damaged, "a refusal touches nothing"
    capsys.readouterr()
    fresh = load_config("cartpole-ppo", [f"run.resume={run_dir}", "run.if_no_checkpoint=start_fresh"])
    assert run_experiment(fresh) == 0
    aside = folder / "unusable-launch2"
    assert f"moved them to {aside}; training from scratch" in capsys.readouterr().err
    assert sorted(p.name for p in aside.glob("ckpt-*.pt")) == damaged and (aside / checkpoint.LATEST).is_file()
    assert checkpoint.load_latest(run_dir)["version"] > 0 and summary_of(run_dir)["launch"] == 2


def test_a_second_run_on_a_locked_dir_is_refused(run_dir):
    holder = load_config("cartpole-ppo", [f"run.run_dir={run_dir}"])
    claim = claim_run_dir(holder)
    try:
        line = one_line_error(srl("run", "cartpole-ppo", f"run.run_dir={run_dir}", "launch.launcher=inline"), str(run_dir),
                              "in use by another run")
        assert f"pid {os.getpid()}" in line
        with pytest.raises(ConfigError, match="in use"):  # in this process as well
            claim_run_dir(load_config("cartpole-ppo", [f"run.run_dir={run_dir}"]))
    finally:
        claim.release()
    claim_run_dir(load_config("cartpole-ppo", [f"run.run_dir={run_dir}"])).release()  # released: free again


def test_a_running_run_holds_its_dir_until_it_ends_even_when_killed(run_dir):
    """Two real `srl run` processes: the second is refused while the first runs; once the first is
    SIGKILLed (no chance to clean up) the OS has released the lock and run.resume= takes the dir."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS)])}
    first = subprocess.Popen([sys.executable, "-m", "srl.cli", "run", "cartpole-ppo", "launch.launcher=inline",
                              f"run.run_dir={run_dir}", "monitor.display=off", "stop.target_return=null", "stop.time_limit_s=120",
                              "run.checkpoint_interval_s=0.5"], cwd=TESTS, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not checkpoint.latest_meta(run_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        line = one_line_error(srl("run", "cartpole-ppo", f"run.resume={run_dir}", "launch.launcher=inline"), str(run_dir),
                              "in use by another run")
        assert f"pid {first.pid}" in line
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    claim_run_dir(load_config("cartpole-ppo", [f"run.resume={run_dir}"])).release()


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = load_config("cartpole-ppo")
    Path(str(first.run.run_dir)).mkdir(parents=True)
    second = load_config("cartpole-ppo")
    assert str(second.run.run_dir) != str(first.run.run_dir)


def test_a_trainer_loads_only_its_own_runs_checkpoints(run_dir, tmp_path, capsys):
    mine = short_run(run_dir)
    other = short_run(tmp_path / "other", "run.seed=2")
    ours = checkpoint.load_latest(run_dir)["version"]
    # the other run's newest checkpoint dropped in, as the newest by version and named by latest.json
    src = Path(checkpoint.load_latest(tmp_path / "other")["path"])
    name = f"ckpt-{ours + 100:08d}.pt"
    shutil.copy(src, checkpoint.checkpoint_dir(run_dir) / name)
    (checkpoint.checkpoint_dir(run_dir) / "latest.json").write_text(json.dumps({"path": name}))
    capsys.readouterr()
    resumed = load_config("cartpole-ppo", [f"run.resume={run_dir}", "stop.total_env_steps=4000"])
    assert run_experiment(resumed) == 0
    err = capsys.readouterr().err
    assert f"saved by another run (run_id {other['run_id']}; this run is {mine['run_id']})" in err
    assert f"trainer resumed from checkpoint version {ours}" in err
    assert summary_of(run_dir)["run_id"] == mine["run_id"]


def test_a_restarted_trainer_takes_the_newest_of_its_own_runs_that_loads(tmp_path, capsys):
    """What a trainer does at a restart (resume from the run dir, no controller check first)."""
    import gymnasium as gym

    from srl.algos.ppo import PPO, PPOConfig
    from srl.faults import RunHalted
    from srl.models.mlp import ActorCriticMLP
    from srl.workers.learner import Learner, LearnerSettings

    def learner(resume: bool, run_id: str = "mine") -> Learner:
        policy = ActorCriticMLP(gym.spaces.Box(-1, 1, (3,), np.float32), gym.spaces.Discrete(2))
        settings = LearnerSettings(tmp_path, 60.0, resume=resume, run_id=run_id)
        return Learner(policy, PPO(policy, PPOConfig(), 1000), settings)

    for version in (1, 2):
        first = learner(False)
        first.version = version
        first.save_checkpoint()
    folder = checkpoint.checkpoint_dir(tmp_path)
    other = learner(False, run_id="theirs")
    other.version = 3
    other.save_checkpoint()  # latest.json now names another run's checkpoint
    (folder / "ckpt-00000004.pt").write_bytes(b"PK\x03\x04 truncated")
    capsys.readouterr()
    assert learner(True).version == 2
    err = capsys.readouterr().err
    assert "ckpt-00000003.pt: saved by another run (run_id theirs; this run is mine)" in err
    assert "ckpt-00000004.pt: unreadable" in err and "trainer resumed from checkpoint version 2" in err
    with pytest.raises(RunHalted, match="no usable checkpoint"):  # none of its own: it will not start over
        learner(True, run_id="a third run")


def test_checkpoint_rotation_keeps_what_it_just_wrote(tmp_path):
    policy = torch.nn.Linear(2, 2)
    folder = checkpoint.checkpoint_dir(tmp_path)
    folder.mkdir(parents=True)
    for version in (50, 60, 70):  # another run's, with higher versions
        torch.save({"version": version}, folder / f"ckpt-{version:08d}.pt")
    path = checkpoint.save(tmp_path, 1, 1, policy, {}, run_id="r")
    assert path is not None and path.is_file()


# ------------------------------------------------------------------ damaged files


def test_a_truncated_latest_checkpoint_is_skipped_for_an_older_one(run_dir, capsys):
    short_run(run_dir)
    newest = checkpoint.latest_meta(run_dir)
    path = checkpoint.checkpoint_dir(run_dir) / newest["path"]
    path.write_bytes(path.read_bytes()[:500])  # a crash while copying, a full disk
    capsys.readouterr()
    resumed = load_config("cartpole-ppo", [f"run.resume={run_dir}", "stop.total_env_steps=4000"])
    assert run_experiment(resumed) == 0
    err = capsys.readouterr().err
    assert f"srl: skipped {path}: unreadable" in err
    assert "trainer resumed from checkpoint version" in err
    assert summary_of(run_dir)["error"] is None


def test_a_checkpoint_of_other_layer_sizes_is_refused_before_the_run_starts(run_dir):
    short_run(run_dir)
    proc = srl("run", "cartpole-ppo", f"run.resume={run_dir}", "policy_kwargs.hidden_sizes=[8]", "launch.launcher=inline")
    one_line_error(proc, "no usable checkpoint", "does not fit this run's policy")
    assert json.loads((run_dir / "run.lock").read_text())["launch"] == 1  # a refused launch is not one


def test_garbage_latest_json_is_named_and_passed_over(run_dir):
    short_run(run_dir)
    latest = checkpoint.checkpoint_dir(run_dir) / "latest.json"
    latest.write_bytes(b"\x00garbage{")
    proc = srl("eval", str(run_dir), "--episodes", "1")
    assert proc.returncode == 0 and f"srl: skipped {latest}: not JSON" in proc.stderr, proc.stderr
    for path in checkpoint.checkpoint_dir(run_dir).glob("ckpt-*.pt"):
        path.unlink()
    one_line_error(srl("eval", str(run_dir)), "latest.json: not JSON")


def test_srl_eval_of_a_missing_directory_names_it(tmp_path):
    """It blamed run.resume (a field `srl eval` has not), the loader of run directories being shared."""
    missing = tmp_path / "no such run"
    line = one_line_error(srl("eval", str(missing)), f"eval RUN_DIR: {str(missing)!r} does not exist")
    assert "run.resume" not in line, line
    one_line_error(srl("eval", str(tmp_path)), f"{str(tmp_path)!r} has no config.yaml (not a run directory)")


def test_garbage_config_yaml_is_one_line(run_dir):
    short_run(run_dir)
    config = run_dir / "config.yaml"
    config.write_text("experiment: [unclosed\n  : :\n")
    one_line_error(srl("eval", str(run_dir)), str(config), "not a readable YAML config")
    one_line_error(srl("run", "cartpole-ppo", f"run.resume={run_dir}"), str(config))
    config.write_text("just a string\n")
    one_line_error(srl("eval", str(run_dir)), str(config), "not a config")


def test_latest_json_cannot_lead_outside_the_checkpoints(run_dir):
    short_run(run_dir)
    latest = checkpoint.checkpoint_dir(run_dir) / "latest.json"
    for forged in ("../../../../etc/passwd", "/etc/passwd", "../config.yaml"):
        latest.write_text(json.dumps({"path": forged, "version": 1, "env_steps": 1}))
        proc = srl("eval", str(run_dir), "--episodes", "1")
        assert proc.returncode == 0, proc.stderr  # the run's own newest checkpoint instead
        assert f"{forged!r} leads outside" in proc.stderr and "refused" in proc.stderr
    (run_dir / "checkpoints" / "ckpt-link.pt").symlink_to("/etc/passwd")
    latest.write_text(json.dumps({"path": "ckpt-link.pt"}))
    for path in checkpoint.checkpoint_dir(run_dir).glob("ckpt-0*.pt"):
        path.unlink()
    one_line_error(srl("eval", str(run_dir)), "no usable checkpoint", "leads outside")


def test_summary_json_holds_no_nan_token(tmp_path):
    """summary.json's means can be NaN or inf (an eval round of a NaN env): null, strictly."""
    from srl.launch.monitor import RunMonitor
    from srl.launch.outputs import RunOutputs

    config = build_config({"experiment": "x", "run_dir": str(tmp_path), "learning_curve": False})
    monitor = RunMonitor(config)
    monitor.episodes.add([math.inf, 1.0], [1, 1])
    RunOutputs(config, 0.0).finish(monitor, "done", None)
    assert summary_of(tmp_path)["episode_return_mean"] is None
