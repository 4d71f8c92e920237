"""Gymnasium AsyncVectorEnv, random actions: one subprocess per env, stepped in lock step.

Parent side: `sample(env, seconds, num_envs)`. Run as a script with the venv's python, it is the
child: `gym_async_peer.py ENV SECONDS NUM_ENVS` prints one JSON line.
"""

from __future__ import annotations

import sys
from typing import Any

VENV = "gym_async"
PACKAGES = ["gymnasium==1.2.2", "ale-py", "opencv-python-headless"]  # AtariPreprocessing needs cv2
PROBE = ["gymnasium", "ale-py", "numpy"]


def sample(env: str, seconds: float, num_envs: int, timeout_s: float = 300) -> dict[str, Any]:
    from common import PeerError, ensure_venv, run_peer_script

    try:
        versions = ensure_venv(VENV, PACKAGES, PROBE)
    except PeerError as e:
        return {"error": str(e)}
    result = run_peer_script(VENV, "gym_async_peer.py", [env, str(seconds), str(num_envs)], timeout_s)
    return {**result, "versions": versions}


def child(env: str, seconds: float, num_envs: int) -> None:
    import gymnasium as gym
    from _child import emit, make_env, timed_steps

    vec = gym.vector.AsyncVectorEnv([lambda: make_env(env)] * num_envs)
    try:
        vec.reset(seed=0)
        vec.action_space.seed(0)

        def step() -> int:
            vec.step(vec.action_space.sample())
            return num_envs

        emit({"peer": "gymnasium AsyncVectorEnv", "num_envs": num_envs, **timed_steps(step, seconds)})
    finally:
        vec.close()


if __name__ == "__main__":
    child(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]))
