"""The pure helpers of benchmarks/peers (parsing, medians, ratios); no virtualenv is touched."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks" / "peers"))

import common
import srl_side
import torch


def test_last_json_line_skips_logs_and_torn_lines():
    text = 'starting\n{"a": 1}\nlog {"not": json\n{"b": 2}\n[1, 2]\n{"torn": \n'
    assert common.last_json_line(text) == {"b": 2}
    assert common.last_json_line("no json here\n") is None


def test_median_leaves_out_errors_and_none():
    assert common.median_or_none([3.0, None, 1.0, "x", 2.0, True]) == 2.0
    assert common.median_or_none([None]) is None


def test_ratio_is_none_without_both_sides():
    assert common.ratio(300.0, 100.0) == 3.0
    assert common.ratio(None, 100.0) is None
    assert common.ratio(100.0, 0) is None


def test_summarize_gives_medians_ratios_and_errors():
    runs = {
        "srl": [{"env_steps_per_s": 900.0}, {"env_steps_per_s": 1100.0}, {"env_steps_per_s": 1000.0}],
        "peer": [{"env_steps_per_s": 500.0}, {"error": "boom"}, {"env_steps_per_s": 400.0}],
        "broken": [{"error": "pip failed"}],
        "absent": [{"skipped": "not here"}],
    }
    out = common.summarize(runs, "env_steps_per_s")
    assert out["srl"]["median"] == 1000.0
    assert out["peer"]["median"] == 450.0
    assert out["peer"]["ratio_srl_over_peer"] == round(1000 / 450, 3)
    assert out["peer"]["error"] == "boom"
    assert out["broken"] == {"median": None, "runs": [None], "error": "pip failed", "ratio_srl_over_peer": None}
    assert out["absent"]["skipped"] == "not here"
    assert "ratio_srl_over_peer" not in out["srl"]


def test_srl_rate_from_metrics_leaves_start_up_out():
    lines = [
        {"env_steps": 0, "time_s": 3.0},
        {"env_steps": 512, "time_s": 4.0},
        {"losses/policy_loss": 0.1},  # a report without counters is ignored
        {"env_steps": 2560, "time_s": 6.0},
    ]
    assert srl_side.rate_from_metrics(lines) == {"env_steps_per_s": 1024.0, "measured_s": 2.0, "env_steps": 2560}
    assert "error" in srl_side.rate_from_metrics([{"env_steps": 0, "time_s": 1.0}])


def test_srl_trains_pong_with_the_peers_sticky_actions(tmp_path):
    """The peers step ALE/Pong-v5 with its sticky actions; pong-ppo turns them off, so srl's side
    of the comparison turns them back on, and keeps the caller's overrides after its own."""
    from srl.config.load import load_config

    overrides = srl_side.train_overrides("pong", 1000, tmp_path / "run", ["env_backend=envpool"])
    config = load_config("pong-ppo", overrides)
    assert config.env_kwargs["repeat_action_probability"] == 0.25 and config.env_kwargs["frame_stack"] == 4
    assert config.stop.total_env_steps == 1000 and config.stop.target_return is None and config.env_backend == "envpool"
    assert load_config("pong-ppo", []).env_kwargs["repeat_action_probability"] == 0
    assert not any("repeat_action" in x for x in srl_side.train_overrides("cartpole", 1000, tmp_path / "run"))


def test_sample_factory_rate_from_its_log_timestamps():
    import sf_peer

    log = (
        "[2026-11-23 12:00:00,000][001] Fps is (10 sec: nan, 60 sec: nan). Total num frames: 0. Throughput: 0: nan\n"
        "[2026-11-23 12:00:05,000][001] Fps is (10 sec: 10.0, 60 sec: 10.0). Total num frames: 1000. Throughput\n"
        "[2026-11-23 12:00:07,500][009] Heartbeat connected on Batcher_0\n"
        "[2026-11-23 12:00:10,000][001] Fps is (10 sec: 10.0, 60 sec: 10.0). Total num frames: 6000. Throughput\n"
    )
    assert sf_peer.rate_from_log(log) == {"env_steps_per_s": 1000.0, "measured_s": 5.0, "env_steps": 6000}
    assert "error" in sf_peer.rate_from_log(log.splitlines()[0])


def test_has_experiment_reads_srl_lists_table():
    """`srl list` prints a table (a header, then one experiment per row): pong-ppo is found there,
    a name that is no experiment is not, nor is a column header or another registry's name."""
    assert srl_side.has_experiment("pong-ppo") and srl_side.has_experiment("cartpole-ppo")
    assert not srl_side.has_experiment("experiment") and not srl_side.has_experiment("ppo")


def test_gpu_benchmark_runs_its_in_process_parts_on_the_cpu(capsys):
    """benchmarks/gpu.py with an explicit CPU device: the env and inference parts give their
    figures per size, the best size is one of them, and one JSON line goes to standard output."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    out = gpu.main(["--parts", "env", "inference", "--device", "cpu", "--seconds", "0.05", "--repeats", "1",
                    "--num-envs", "64", "256", "--batches", "1", "4"])
    assert out["device"] == "cpu" and out["env"]["best_num_envs"] in (64, 256)
    assert all(out["env"]["by_num_envs"][n]["env_steps_per_s"] > 0 for n in ("64", "256"))
    for experiment in gpu.INFERENCE_EXPERIMENTS:
        rows = out["inference"][experiment]["by_batch_rows"]
        assert set(rows) == {"1", "4"} and all(r["rows_per_s"] > 0 and r["batches_timed"] >= 5 for r in rows.values())
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == out
    # on the CPU acting has one path: timed once, with the targets beside it; the CPU named
    assert all("graphed_by_batch_rows" not in out["inference"][e] for e in gpu.INFERENCE_EXPERIMENTS)
    assert out["inference"]["cartpole-ppo"]["targets"]["1"]["target_ms"] == 0.15
    assert "eager_ms" in out["inference"]["cartpole-ppo"]["targets"]["1"]
    assert "CPU(s)" in out["lscpu"] or "error" in out["lscpu"]


def test_gpu_benchmark_splits_a_batch_into_actors_slots(monkeypatch):
    """--rows-per-slot 8: a batch of 16 rows reaches Acting as 2 actors' slots of 8 rows, one of 12
    as slots of 8 and 4."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    calls, real = [], gpu.acting_for

    def counted(experiment, device, graphs="off"):
        acting, graph = real(experiment, device, graphs)

        def act(slots, requests):
            calls.append((tuple(len(s["action"]) for s in slots), tuple(r.actor for r in requests)))
            acting(slots, requests)

        return act, graph

    monkeypatch.setattr(gpu, "acting_for", counted)
    rows = gpu.inference_speed(torch.device("cpu"), [16, 12], 0.05, rows_per_slot=8)["cartpole-ppo"]["by_batch_rows"]
    assert rows["16"]["rows_per_s"] > 0 and {c for c in calls} == {((8, 8), (0, 1)), ((8, 4), (0, 1))}


def test_gpu_benchmark_reads_lscpu():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    text = ("Architecture:             x86_64\nCPU(s):                   16\nModel name:               AMD EPYC 9454 48-Core\n"
            "Thread(s) per core:       2\nFlags:                    fpu sse avx2 avx512f amx_tile\nNUMA node(s): 1\n")
    fields = gpu.parse_lscpu(text)
    assert fields["CPU(s)"] == "16" and fields["Model name"] == "AMD EPYC 9454 48-Core" and fields["NUMA node(s)"] == "1"
    assert fields["Flags"] == "avx2 avx512f amx_tile"


def test_gpu_benchmark_runs_pong_at_each_worker_count_within_its_budget(monkeypatch):
    """--workers 8 16: the env limit first, then one srl / Sample Factory pair per count, each with
    its ratio to the limit; a pair the budget has no room for is skipped and said so."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    ran, now = [], [0.0]
    monkeypatch.setattr(gpu, "env_limit", lambda procs, seconds: {"procs": procs, "env_steps_per_s": 20_000})

    def side(device, workers, seconds, sf_python, sf_path, sf_steps):
        ran.append(workers)
        now[0] += 2 * (seconds + 20)  # a pair takes its seconds and start-up
        return {"srl": {"env_steps_per_s": 1000.0 * workers}, "sample_factory": {"missing": "No module"}}

    monkeypatch.setattr(gpu, "pong_side_by_side", side)
    parsed = gpu.parse_args(["--parts", "pong", "--workers", "8", "16", "--pong-seconds", "5"])
    out = gpu.pong_parts(parsed, deadline=1000, clock=lambda: now[0])
    assert ran == [8, 16] and out["env_limit"]["procs"] == 16
    assert out["workers_8"]["srl_over_env_limit"] == 0.4 and out["workers_16"]["srl_over_env_limit"] == 0.8
    ran.clear()
    now[0] = 0.0
    out = gpu.pong_parts(parsed, deadline=2 * 25 + 10, clock=lambda: now[0])  # room for one pair only
    assert ran == [8] and "skipped" in out["workers_16"]


def test_sample_factory_missing_is_reported_not_raised(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import gpu

    why = gpu.sample_factory_missing(sys.executable, str(tmp_path))  # not installed in srl's environment
    assert why is not None and "sample_factory" in why


def test_sample_factory_profile_is_read_from_its_log():
    """Sample Factory logs each component's timing tree when it stops: its busy seconds per component."""
    import sf_peer

    text = ("[2026-11-27 10:00:00,000][01234] RolloutWorker_w0 profile tree view:\n"
            "wait_for_trajectories: 0.1234, enqueue_policy_requests: 1.5000\nenv_step: 48.7012\n  process_env_step: 3.1000\n"
            "[2026-11-27 10:00:01,000][01234] Learner 0 profile tree view:\nmisc: 0.0100\ntrain: 10.7000\n"
            "[2026-11-27 10:00:01,000][01234] Runner profile tree view:\nmain_loop: 60.0000\n"
            "[2026-11-27 10:00:02,000][01234] Collected {0: 303104}, FPS: 5000.0\n")
    profile = sf_peer.profile_from_log(text)
    assert profile["RolloutWorker_w0"]["env_step"] == 48.7012 and profile["RolloutWorker_w0"]["process_env_step"] == 3.1
    assert profile["Learner 0"] == {"misc": 0.01, "train": 10.7} and profile["Runner"] == {"main_loop": 60.0}
