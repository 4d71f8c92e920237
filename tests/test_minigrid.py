"""minigrid-doorkey-ppo learns MiniGrid-DoorKey-5x5 (fixed seed, env-step budget, not seconds).

DoorKey pays 1 - 0.9 * steps / max_steps (250 steps) for reaching the goal through the locked
door, 0 otherwise: a random policy's mean return is about 0.05, so a mean-100 return of 0.9 means
every episode fetches the key, opens the door and walks to the goal in about 25 steps or fewer.
"""

import json

from srl.config.load import load_config
from srl.launch.run import run_experiment

TARGET_RETURN = 0.9
BUDGET_ENV_STEPS = 200_000  # seeds 1-3 reached it in 30k-39k env steps (local launcher); seed 1 in lock step: 38,104


def test_minigrid_doorkey_ppo_reaches_0_9(run_dir):
    config = load_config(
        "minigrid-doorkey-ppo",
        # lock step: the same run every time (the local launcher's timing once left seed 1 below 0.9 at 200k)
        ["run.seed=1", "run.deterministic=true", f"stop.total_env_steps={BUDGET_ENV_STEPS}",
         f"stop.target_return={TARGET_RETURN}", f"run.run_dir={run_dir}", "monitor.display=off"],
    )
    assert config.env_wrappers, "the experiment carries its ImgObsWrapper in the config"
    assert run_experiment(config) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return"), summary
    assert summary["episode_return_mean"] >= TARGET_RETURN and summary["episodes"] >= 100, summary
