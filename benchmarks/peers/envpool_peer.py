"""EnvPool 1.2.5, random actions: C++ envs on a thread pool, stepped synchronously in one batch.

Pong uses EnvPool's own Atari preprocessing set to the same work as srl's (84x84 gray, 4 frames
per step, 30 no-ops, sticky actions 0.25 as the v5 ids, one frame per observation, no episodic
life): close, but not the identical code path. Run as a script it is the child:
`envpool_peer.py ENV SECONDS NUM_ENVS THREADS`.
"""

from __future__ import annotations

import sys
from typing import Any

VENV = "envpool"
PACKAGES = ["envpool==1.2.5"]
PROBE = ["envpool", "gymnasium", "numpy"]
PONG_KWARGS = {"stack_num": 1, "frame_skip": 4, "noop_max": 30, "img_height": 84, "img_width": 84,
               "gray_scale": True, "episodic_life": False, "repeat_action_probability": 0.25}


def sample(env: str, seconds: float, num_envs: int, threads: int, timeout_s: float = 300) -> dict[str, Any]:
    from common import PeerError, ensure_venv, run_peer_script

    try:
        versions = ensure_venv(VENV, PACKAGES, PROBE)
    except PeerError as e:
        return {"error": str(e)}
    args = [env, str(seconds), str(num_envs), str(threads)]
    return {**run_peer_script(VENV, "envpool_peer.py", args, timeout_s), "versions": versions}


def child(env: str, seconds: float, num_envs: int, threads: int) -> None:
    import envpool
    import numpy as np
    from _child import emit, timed_steps

    task, kwargs = ("CartPole-v1", {}) if env == "cartpole" else ("Pong-v5", PONG_KWARGS)
    pool = envpool.make(task, env_type="gymnasium", num_envs=num_envs, num_threads=threads, seed=0, **kwargs)
    pool.reset()
    rng = np.random.default_rng(0)
    actions = pool.action_space.n

    def step() -> int:
        pool.step(rng.integers(0, actions, size=num_envs))
        return num_envs

    emit({"peer": "envpool", "num_envs": num_envs, "threads": threads, **timed_steps(step, seconds)})
    pool.close()


if __name__ == "__main__":
    child(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
