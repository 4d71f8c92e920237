"""`srl eval RUN_DIR`: the run's latest checkpoint, acting for N episodes in one process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from srl import checkpoint
from srl.config import ConfigError, build_config, load_saved_config
from srl.envs import make_vector_env
from srl.graph import build_graph, make_policy


def evaluate_run(run_dir: str | Path, episodes: int, seed: int, deterministic: bool = True) -> dict[str, Any]:
    run_dir = Path(run_dir)
    config = build_config(load_saved_config(run_dir))
    state = checkpoint.load_latest(run_dir)
    if state is None:
        raise ConfigError(f"{str(run_dir)!r} has no checkpoint to evaluate")
    graph = build_graph(config)
    policy = make_policy(config, graph.observation_space, graph.action_space)
    policy.load_state_dict(state["policy"])
    policy.eval()
    env = make_vector_env(config.env, config.env_kwargs, num_envs=1, env_index_offset=0)
    obs = env.reset(seed=seed)
    returns, running = [], np.zeros(env.num_rows)
    while len(returns) < episodes:
        with torch.inference_mode():
            action = policy.rollout(torch.from_numpy(obs), deterministic=deterministic)["action"].numpy()
        step = env.step(action)
        running += step.reward
        obs = step.obs
        if (step.terminated | step.truncated).any():  # one env: every row ends together
            returns.append(float(running.mean()))
            running[:] = 0
    env.close()
    return {
        "run_dir": str(run_dir),
        "policy_version": state["version"],
        "episodes": episodes,
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "returns": returns,
    }
