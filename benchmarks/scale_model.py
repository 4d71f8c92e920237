"""A scaling model of an srl run: its env steps/s are the minimum over its stages, each stage's
capacity taken from a measurement on this machine; checked against the measured 1-64 actor
curves, then asked about 100, 1,000 and 10,000 cores.

Stages (env steps/s each can carry):

- actors: actor cores / CPU per env step (the env's own step, srl's per-step work in the actor:
  over tcp, signing what it sends and verifying what it gets, taken from benchmarks/ingest.py as
  the mirror of what the receiver measured; with inline inference, the policy's forward pass);
  an actor whose env sleeps is capped by its envs instead (the 1-64 curve).
- host CPU (the check only): the machine's cores / CPU per step of every role at once, less
  what each idle worker process takes (Ray's threads).
- policy workers: their count x what one takes in over tcp (ingest.py's `policy`, by obs size).
- trainers: their count x what one takes in over tcp (ingest.py's `trainer`).
- controller: it reads every worker's 2 reports a second on one thread; past the workers it can
  read (docs/scaling.md "## Controller"), the steps of the rest are not carried.
- parameter freshness: the parameter service sends each version to every subscriber (policy
  workers, or actors with inline inference) through one link, one version at a time. While one is
  on its way the trainers make more; a segment acted more than `max_policy_lag` versions behind
  is dropped (srl.config), so the steps a second kept are at most max_policy_lag x the env steps a
  version is trained on / the time a version takes to reach every subscriber.

What it cannot know: the network (an assumed link rate for the parameter service; loopback
everywhere else), GPUs (no forward or backward pass on one is timed: trainers and policy workers
are bounded by their ingest only), stragglers, hosts' own overheads, and its constants come from
2 shared cores under load. See docs/scaling.md "## A scaling model".

    PYTHONPATH=. python benchmarks/scale_model.py [--ingest ingest.jsonl] [--cores 100 1000 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

# benchmarks/scaling.py's curves, docs/benchmarks.md "Sampling throughput against the number of actor
# workers" (2026-11-23, 2 vCPU, commits 53d967a local and 46862db Ray): a 5 ms sleeping env, 4 envs
# per actor, inline inference, shm. The 64-actor local run and Ray's runs from 16 actors up ran
# beside other benchmarks (load 10-60).
CURVES = {
    "local": {1: 183.2, 2: 378.0, 4: 751.6, 8: 1507.4, 16: 3008.1, 32: 5855.9, 64: 4430.6},
    "ray": {1: 188.6, 2: 364.3, 4: 768.5, 8: 1535.7, 16: 2937.9, 32: 3474.9, 64: 5944.2},
}
LOADED = {"local": (64,), "ray": (16, 32, 64)}  # measured beside other benchmarks (Ray 64: 1 run of 3)
CURVE_CPUS, CURVE_STEP_S = 2, 0.005
FIT_ACTORS = (1, 2, 4, 8)  # the actor constant is fitted on these; the rest of the curve checks it
# docs/benchmarks.md, same section: 64 local actors at load ~3 gave 8,461 env steps/s, the one run
# of the curve's conditions where the 2 cores, not the sleeping envs, were the limit (fits the
# CPU per env step of every role together: actor, trainer, streams, process switches)
SATURATED = {"actors": 64, "env_steps_per_s": 8461.0}
RAY_IDLE_CORES_PER_WORKER = 0.035  # docs/benchmarks.md: "~3.5% of a core per idle Ray worker"
# docs/scaling.md "## Controller" (benchmarks/controller_soak.py, 2026-11-28 04:00-04:14 UTC, commit
# 77a7fb4, 3 rounds interleaved, medians): 78 us of the controller's thread per report at 1,024
# workers (62 at 4,096: the larger drains share their fixed costs), each worker reporting twice a
# second; 99 us was the figure before epochs were sent as pairs. Replaced by --controller-soak FILE.
CONTROLLER_S_PER_REPORT, REPORTS_PER_S_PER_WORKER = 78e-6, 2.0
CONTROLLER_SOURCE = "docs/scaling.md, controller_soak.py at 1,024 workers (commit 77a7fb4)"
# benchmarks/ingest.py on this machine, 2026-11-28 01:40 UTC (docs/scaling.md "## Ingest"): env steps
# per CPU second of the receiving process, over tcp, by obs bytes per step. Replaced by --ingest FILE.
INGEST = {
    "trainer": {16: 5982780, 1024: 900900, 28672: 30720},
    "policy": {16: 39971, 1024: 45527, 28672: 22767},
}
# docs/benchmarks.md "Re-measured on an idle machine": 2 raw ALE/Pong-v5 envs with the standard
# preprocessing, one per core, 2,820.6 env steps/s on 2 cores: 709 us of CPU per Atari env step
ATARI_STEP_US = 2 / 2820.6 * 1e6
HMAC_BYTES_PER_S = 600e6  # docs/benchmarks.md streams_micro: 500-670 MB/s of HMAC-SHA256 per core
ASSUMED_LINK_BYTES_PER_S = 1.25e9  # 10 Gbit/s for the parameter service's link: assumed, not measured

STAGES = ("actors", "policy_workers", "trainers", "controller", "parameter_freshness")


def configurations(atari_step_s: float, hns_step_s: float, hns_forward_s: float) -> dict[str, dict]:
    """The two shapes asked about. Atari: 84x84x4 uint8, policy workers, a Nature-CNN (1.7 M
    float32 parameters), srl.experiments.atari's batch (one segment of 128 steps x 4 envs, a
    ring split of 8 envs with policy workers) and max_policy_lag; hide-and-seek: the SRL paper's 15,360 inline actors to 32 trainers,
    entity observations taken as 1 KiB a step, a policy of 5 MB and a batch of 160 x 1,024 env steps
    over the 32 trainers (all three assumed), srl's default max_policy_lag."""
    return {
        "atari": {"obs_bytes": 28672, "inference": "policy_worker", "env_step_s": atari_step_s,
                  "forward_s": 0.0, "policy_share": 0.15, "trainer_share": 0.05,
                  "param_bytes": 1.7e6 * 4, "batch_steps_per_trainer": 128 * 4, "max_policy_lag": 5},
        "hide_and_seek": {"obs_bytes": 1024, "inference": "inline", "env_step_s": hns_step_s,
                          "forward_s": hns_forward_s, "policy_share": 0.0, "trainer_share": 32 / (15360 + 32),
                          "param_bytes": 5e6, "batch_steps_per_trainer": 160 * 1024 // 32, "max_policy_lag": 2},
    }  # fmt: skip


def ingest_rate(side: str, obs_bytes: int, ingest: dict) -> float:
    """Env steps per CPU second at `obs_bytes`, log-log interpolated between measured sizes."""
    points = sorted(ingest[side].items())
    if obs_bytes <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if obs_bytes <= x1:
            t = math.log(obs_bytes / x0) / math.log(x1 / x0)
            return math.exp(math.log(y0) + t * (math.log(y1) - math.log(y0)))
    return points[-1][1] * points[-1][0] / obs_bytes  # past the largest: per byte


def controller_workers(s_per_report: float = CONTROLLER_S_PER_REPORT) -> float:
    """The workers one controller thread keeps up with."""
    return 1.0 / (s_per_report * REPORTS_PER_S_PER_WORKER)


def load_controller(path: str | None) -> tuple[float, str]:
    """Seconds of the controller's thread per report, and where the figure comes from: the
    constant, or controller_soak.py's JSON line in `path` (its last line): the median of
    `us_per_report` over the runs of its largest size that finished."""
    if path is None:
        return CONTROLLER_S_PER_REPORT, CONTROLLER_SOURCE
    line = [x for x in Path(path).read_text().splitlines() if x.strip()][-1]
    runs = [r for r in json.loads(line)["runs"] if r.get("us_per_report") is not None]
    if not runs:
        raise ValueError(f"{path}: no run of controller_soak.py with us_per_report")
    largest = max(r["workers"] for r in runs)
    measured = statistics.median(r["us_per_report"] for r in runs if r["workers"] == largest)
    return measured * 1e-6, f"{path}: controller_soak.py at {largest} workers"


def stages(config: dict, cores: int, ingest: dict, controller_s: float = CONTROLLER_S_PER_REPORT) -> dict[str, float]:
    trainers = max(1, round(cores * config["trainer_share"]))
    policy_workers = round(cores * config["policy_share"]) if config["inference"] == "policy_worker" else 0
    if config["inference"] == "policy_worker":
        policy_workers = max(1, policy_workers)
    actors = max(1, cores - trainers - policy_workers)
    obs = config["obs_bytes"]
    # srl's work in an actor over tcp: the mirror of what its receivers measured (it signs what they verify)
    srl_step_s = 1.0 / ingest_rate("trainer", obs, ingest)
    if config["inference"] == "policy_worker":
        srl_step_s += 1.0 / ingest_rate("policy", obs, ingest)
    actor_rate = actors / (config["env_step_s"] + config["forward_s"] + srl_step_s)
    workers = actors + trainers + policy_workers + 1  # and the parameter service
    subscribers = policy_workers if config["inference"] == "policy_worker" else actors
    version_s = max(config["param_bytes"] * subscribers / ASSUMED_LINK_BYTES_PER_S,
                    config["param_bytes"] / HMAC_BYTES_PER_S)  # signed once, sent to each
    out = {
        "actors": actor_rate,
        "policy_workers": policy_workers * ingest_rate("policy", obs, ingest) if policy_workers else math.inf,
        "trainers": trainers * ingest_rate("trainer", obs, ingest),
        "controller": actor_rate * min(1.0, controller_workers(controller_s) / workers),
        # the trainers step together (one group): a version is trained on every trainer's batch
        "parameter_freshness": config["max_policy_lag"] * trainers * config["batch_steps_per_trainer"] / version_s,
    }
    return {"workers": {"actors": actors, "policy_workers": policy_workers, "trainers": trainers}, "stages": out}


def bound(stage_rates: dict[str, float]) -> tuple[float, str]:
    """The minimum law: the run goes as fast as its slowest stage."""
    binding = min(stage_rates, key=lambda s: stage_rates[s])
    return stage_rates[binding], binding


def fit_curve() -> dict:
    local = CURVES["local"]
    per_actor = statistics.median(local[n] / n for n in FIT_ACTORS)  # env-capped rate of one actor
    cpu_s_per_step = CURVE_CPUS / SATURATED["env_steps_per_s"]  # every role's CPU per env step
    return {"per_actor_env_steps_per_s": per_actor, "cpu_s_per_env_step": cpu_s_per_step}


def curve_point(actors: int, launcher: str, fitted: dict) -> dict:
    idle = RAY_IDLE_CORES_PER_WORKER * (actors + 2) if launcher == "ray" else 0.0  # + trainer, service
    rates = {
        "actors": actors * fitted["per_actor_env_steps_per_s"],
        "host_cpu": max(0.0, CURVE_CPUS - idle) / fitted["cpu_s_per_env_step"],
    }
    predicted, binding = bound(rates)
    return {"predicted": round(predicted), "binding": binding}


def check(fitted: dict) -> dict:
    """Each point of the curves the fit did not use: predicted against measured."""
    out, errors, quiet = {}, [], []
    for launcher, curve in CURVES.items():
        out[launcher] = {}
        for n, measured in curve.items():
            point = curve_point(n, launcher, fitted)
            point["measured"] = measured
            point["error"] = round(point["predicted"] / measured - 1, 3)
            point["fitted_on"] = launcher == "local" and n in FIT_ACTORS
            point["loaded"] = n in LOADED[launcher]
            out[launcher][str(n)] = point
            if not point["fitted_on"]:
                errors.append(abs(point["error"]))
                if not point["loaded"]:
                    quiet.append(abs(point["error"]))
    summary = lambda e: {"median_abs_error": round(statistics.median(e), 3), "max_abs_error": round(max(e), 3),  # noqa: E731
                         "within_15pct": sum(x <= 0.15 for x in e), "of": len(e)}  # fmt: skip
    return {"points": out, "all_checked": summary(errors), "quiet_checked": summary(quiet)}


def predict(configs: dict[str, dict], core_counts: list[int], ingest: dict,
            controller_s: float = CONTROLLER_S_PER_REPORT) -> dict:  # fmt: skip
    out: dict[str, dict] = {}
    for name, config in configs.items():
        out[name] = {}
        for cores in core_counts:
            model = stages(config, cores, ingest, controller_s)
            rate, binding = bound(model["stages"])
            # where freshness binds: what the other stages would carry, and how many versions the
            # trainers would make while one reaches every subscriber at that rate (max_policy_lag allowed)
            unfresh, _ = bound({s: v for s, v in model["stages"].items() if s != "parameter_freshness"})
            behind = unfresh / model["stages"]["parameter_freshness"] * config["max_policy_lag"]
            out[name][str(cores)] = {
                "env_steps_per_s": round(rate), "binding": binding, "workers": model["workers"],
                "without_freshness": round(unfresh),
                "versions_behind_without_freshness": round(behind, 1),
                "stages": {s: (round(v) if math.isfinite(v) else None) for s, v in model["stages"].items()},
            }  # fmt: skip
    return out


def load_ingest(path: str | None) -> dict:
    """ingest.py's JSON line: env steps per CPU second by side and obs bytes."""
    if path is None:
        return INGEST
    line = [x for x in Path(path).read_text().splitlines() if x.strip()][-1]
    measured = json.loads(line)["by_obs_bytes"]
    return {side: {int(size): float(r["env_steps_per_cpu_s"]) for size, r in sizes.items()}
            for side, sizes in measured.items()}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ingest", help="a file whose last line is benchmarks/ingest.py's JSON (default: the figures in docs/scaling.md)")
    parser.add_argument("--controller-soak", help="a file whose last line is benchmarks/controller_soak.py's JSON "
                        "(default: its figure in docs/scaling.md)")
    parser.add_argument("--cores", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--atari-step-us", type=float, default=round(ATARI_STEP_US), help="CPU per Atari env step (ALE/Pong-v5, preprocessed)")
    parser.add_argument("--hns-step-ms", type=float, default=5.0, help="CPU per hide-and-seek env step: assumed")
    parser.add_argument("--hns-forward-ms", type=float, default=1.0, help="CPU per inline forward pass: assumed")
    args = parser.parse_args()
    ingest = load_ingest(args.ingest)
    if set(ingest) != {"trainer", "policy"}:
        parser.error(f"--ingest: needs both sides, trainer and policy; got {sorted(ingest)}")
    try:
        controller_s, controller_source = load_controller(args.controller_soak)
    except (OSError, ValueError, KeyError) as error:
        parser.error(f"--controller-soak: {error}")
    fitted = fit_curve()
    configs = configurations(args.atari_step_us * 1e-6, args.hns_step_ms * 1e-3, args.hns_forward_ms * 1e-3)
    print(json.dumps({
        "benchmark": "scale_model", "stages": list(STAGES), "fitted": fitted,
        "constants": {"controller_workers": round(controller_workers(controller_s)),
                      "controller_us_per_report": round(controller_s * 1e6, 1), "controller_source": controller_source,
                      "ingest_env_steps_per_cpu_s": ingest,
                      "hmac_bytes_per_s": HMAC_BYTES_PER_S, "assumed_link_bytes_per_s": ASSUMED_LINK_BYTES_PER_S},
        "configs": configs, "check": check(fitted), "predictions": predict(configs, args.cores, ingest, controller_s),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
