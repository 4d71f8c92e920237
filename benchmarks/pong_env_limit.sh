#!/usr/bin/env bash
# Pong at the env limit (issue 35), in about 75 s on a 16-core machine with EnvPool installed:
#   1. EnvPool Pong alone, sync, 64 envs on one thread per core (benchmarks/peers/envpool_peer.py; target >= 30,000);
#   2. the same in async mode (batch of 32 of 64 envs), to check srl's choice of sync (docs/tuning.md, env_backend);
#   3. srl's sampling (srl bench sampling) with launch.layout=machine: env_backend=auto (EnvPool) vs loop,
#      and auto with 3 bigger actors (4 pool threads each) against the layout's choice.
# One JSON line per measurement on stdout. Durations: RAW_S (EnvPool alone), SRL_S (each srl run, measured
# after start-up), e.g. RAW_S=1 SRL_S=2 bash benchmarks/pong_env_limit.sh for a smoke run.
set -u
cd "$(dirname "$0")/.."
RAW_S=${RAW_S:-5}
SRL_S=${SRL_S:-8}
CORES=$(python -c "import os; print(len(os.sched_getaffinity(0)))")
echo "{\"cores\": $CORES, \"lscpu\": \"$(lscpu | grep -m1 'Model name' | sed 's/.*: *//')\"}"
(cd benchmarks/peers && timeout $((RAW_S + 20)) python envpool_peer.py pong "$RAW_S" 64 "$CORES")
timeout $((RAW_S + 20)) python - "$RAW_S" "$CORES" <<'EOF'
import json, sys, time
import envpool, numpy as np
sys.path.insert(0, "benchmarks/peers")
from envpool_peer import PONG_KWARGS
seconds, threads = float(sys.argv[1]), int(sys.argv[2])
pool = envpool.make("Pong-v5", env_type="gymnasium", num_envs=64, batch_size=32, num_threads=threads, seed=0, **PONG_KWARGS)
rng, steps = np.random.default_rng(0), 0
pool.async_reset()
start = time.perf_counter()
while time.perf_counter() - start < seconds:
    info = pool.recv()[-1]
    pool.send(rng.integers(0, 6, 32), info["env_id"])
    steps += 32
print(json.dumps({"peer": "envpool-async", "num_envs": 64, "batch_size": 32, "threads": threads,
                  "steps_per_s": round(steps / (time.perf_counter() - start), 1)}))
pool.close()
EOF
summary='import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); c=d["config"]; a=[v for k,v in d["time_breakdown"].items() if k.startswith("actor:")]; print(json.dumps({"srl": sys.argv[1], "env_steps_per_s": d["env_steps_per_s"], "error": d["error"], "start_up_s": d["start_up_s"], "backend": c["env_backend_chosen"], "actors": c["num_actor_workers"], "envs_per_actor": c["envs_per_actor"], "niceness": c["actor_niceness"], "actor_env_step_share": round(sum(x["env_step"] for x in a) / max(1e-9, sum(x["wall"] for x in a)), 3)}))'
for variant in "auto" "loop" "auto-3-actors"; do
  case $variant in
    auto) extra=() ;;
    loop) extra=(env_backend=loop) ;;
    auto-3-actors) extra=(launch.num_actor_workers=3) ;;
  esac
  timeout $((SRL_S + 40)) python -m srl.cli bench sampling ALE/Pong-v5 launch.layout=machine "${extra[@]}" \
    "stop.time_limit_s=$SRL_S" 2>/dev/null | python -c "$summary" "$variant"
done
