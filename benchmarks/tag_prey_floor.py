"""What a prey can do against random predators in MPE simple_tag (mpe-tag's env): scripted preys,
each over the same episodes, scored as `srl eval RUN_DIR --against random` scores a trained one.

    python benchmarks/tag_prey_floor.py --episodes 400 --seed 0

Prints ONE JSON line: for each prey, the predators' touches per episode (a predator's return / 10)
and the prey's return (-10 per touch, and its penalty for leaving the arena). The preys:
- `random`: uniform actions (the bar a trained prey must beat on touches);
- `still`: never moves;
- `centre`: heads for the centre whenever it is more than 0.5 out (stays in, does not evade);
- `flee_in`: moves away from the predators (1/d^2 each) when one is within 0.3 or when it is
  more than 0.8 out, and back towards the centre then: evades and stays in.
A random prey drifts out of the arena, where the random predators, which stay near where they
started, seldom are: staying in costs touches unless the prey also evades.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

import numpy as np

# the prey's observation (mpe2 simple_tag, 1 prey, 3 predators, 2 obstacles): velocity [0:2],
# position [2:4], obstacles relative [4:8], predators relative [8:14]
NOOP, LEFT, RIGHT, DOWN, UP = range(5)  # discrete actions: u += (right - left, up - down)


def toward(force: np.ndarray) -> int:
    """The discrete action closest to pushing along `force`."""
    if abs(force[0]) > abs(force[1]):
        return RIGHT if force[0] > 0 else LEFT
    return UP if force[1] > 0 else DOWN


def flee_in(obs: np.ndarray, near: float = 0.3, edge: float = 0.8) -> int:
    position, predators = obs[2:4], obs[8:14].reshape(3, 2)
    distance = np.linalg.norm(predators, axis=1)
    out = np.abs(position).max() > edge
    if distance.min() >= near and not out:
        return NOOP
    away = -(predators / (distance[:, None] ** 3 + 1e-6)).sum(axis=0) * 0.5
    return toward(away - 5.0 * position * (np.abs(position) > edge))


def centre(obs: np.ndarray) -> int:
    position = obs[2:4]
    return toward(-position) if np.abs(position).max() > 0.5 else NOOP


def play(prey: Callable[[np.ndarray, np.random.Generator], int], episodes: int, seed: int) -> dict[str, float]:
    from mpe2 import simple_tag_v3

    env = simple_tag_v3.parallel_env(num_good=1, num_adversaries=3, num_obstacles=2, max_cycles=25,
                                     continuous_actions=False)
    rng = np.random.default_rng(seed)
    touches, prey_return = 0.0, 0.0
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed * 1_000_003 + episode)
        while env.agents:
            actions = {a: int(rng.integers(5)) for a in env.agents if a.startswith("adversary")}
            actions["agent_0"] = prey(obs["agent_0"], rng)
            obs, reward, *_ = env.step(actions)
            touches += reward["adversary_0"] / 10
            prey_return += reward["agent_0"]
    env.close()
    return {"touches_per_episode": touches / episodes, "prey_return": prey_return / episodes}


PREYS: dict[str, Callable[[np.ndarray, np.random.Generator], int]] = {
    "random": lambda obs, rng: int(rng.integers(5)),
    "still": lambda obs, rng: NOOP,
    "centre": lambda obs, rng: centre(obs),
    "flee_in": lambda obs, rng: flee_in(obs),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    figures = {name: play(prey, args.episodes, args.seed) for name, prey in PREYS.items()}
    print(json.dumps({"episodes": args.episodes, "seed": args.seed, "preys": figures}))


if __name__ == "__main__":
    main()
