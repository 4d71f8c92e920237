"""The two native backends of `srl.envs.native` and the choice between them (`env_backend`).

* vector: `gymnasium.make_vec(id, n, vectorization_mode="vector_entry_point")`, for ids that
  declare a vector entry point (CartPole-v1). Partial reset: Gymnasium's `reset(options=
  {"reset_mask": mask})` convention, except for `CartPoleVectorEnv`, whose reset ignores the mask
  and which gets a small shim (`_cartpole_reset_rows`) drawing the same start states.
* envpool: `envpool.make_gymnasium(task, num_envs=n, ...)` (the `[envpool]` extra). Partial
  reset: `reset(env_ids)`. Atari ids ("ALE/Pong-v5" -> EnvPool's "Pong-v5") get settings that
  match srl.envs.atari (one 84x84 grey frame, sticky actions 0.25, no reward clipping, no FIRE
  at reset); env_kwargs override them (`frame_stack=K` as in srl.envs.atari becomes `stack_num`).

`auto` picks envpool for an Atari id when EnvPool is installed and every env_kwarg has an EnvPool
twin (ATARI_TWINS: frame_stack, sticky actions, no-ops, frame skip, screen size...): the same
preprocessing in C++ threads, 1.3-1.5x the loop backend's env steps on this 2-core machine and the
only way to the env limit of a 16-core one (issue 35). The observations differ in the reset
dynamics only: EnvPool draws its no-ops and sticky actions from its own generator, seeded per env,
so a seed gives other episodes than the loop backend's (docs/envs.md).

EnvPool runs in sync mode: one `step` sends every env of a ring group its action and returns when
all have stepped, on `num_threads` threads (env_kwargs.num_threads; else an actor gives each of its
pools its share of the machine, srl.graph.sizing.env_threads; else one per CPU up to one per env). Async mode (batch_size <
num_envs, send/recv) returns whichever envs finish first, while an actor's ring group must get back
the envs it sent actions to; srl overlaps at the ring level instead (ring_splits: one group steps
while another waits for actions). Measured on the 2-core machine, 16 Pong envs, random actions:
sync 1 thread 2,440, 2 threads 3,500, 4 threads 3,730 env steps/s; async batch 8 of 16 on 2
threads 4,020 (+15%), 32 envs batch 16 of 32 4,600 against sync 3,540.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium as gym
import numpy as np

from srl.envs.atari import is_atari_id

BACKENDS = ("auto", "loop", "vector", "envpool")
ENVPOOL_HINT = "env_backend='envpool' needs EnvPool: pip install 'srl[envpool]'"
# vector entry points srl has checked to step and partially reset correctly; `auto` picks only these
KNOWN_VECTOR_ENTRY_POINTS = {"gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv"}
ENVPOOL_ATARI_DEFAULTS = {
    "stack_num": 1, "reward_clip": False, "episodic_life": False, "repeat_action_probability": 0.25,
    "noop_max": 30, "frame_skip": 4, "img_height": 84, "img_width": 84, "gray_scale": True,
    "use_fire_reset": False,
}

# how EnvPool runs its envs, not what the envs are: one env built on its own leaves them out
ENVPOOL_RUN_KWARGS = ("num_threads", "thread_affinity_offset")
# srl.envs.atari's env_kwargs (loop backend) and EnvPool's name for each: the ones auto may translate
ATARI_TWINS = {"frame_stack": "stack_num", "repeat_action_probability": "repeat_action_probability",
               "noop_max": "noop_max", "frame_skip": "frame_skip", "full_action_space": "full_action_space",
               "mode": "mode", "difficulty": "difficulty", "screen_size": ("img_height", "img_width")}


def envpool_installed() -> bool:
    return importlib.util.find_spec("envpool") is not None


def envpool_threads(num_envs: int) -> int:
    """EnvPool threads for one pool of `num_envs` built on its own: one per CPU this process may run
    on, never more than one per env (an actor passes its share: srl.graph.sizing.env_threads)."""
    from srl.devices import cpu_count  # not srl.graph.machine: it imports srl.graph, which imports srl.envs

    return max(1, min(num_envs, cpu_count()))


def atari_twins(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The EnvPool kwargs for srl.envs.atari's (loop backend's) `kwargs`; run kwargs pass through."""
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        twin = ATARI_TWINS.get(key, key)
        for name in twin if isinstance(twin, tuple) else (twin,):
            out[name] = value
    return out


def backend_choice(name: str, kwargs: dict[str, Any], backend: str) -> tuple[str, str]:
    """The backend `backend` means for env `name`, and one clause saying why (the run's line)."""
    if backend != "auto":
        return backend, "set by env_backend"
    if vector_entry_point(name) in KNOWN_VECTOR_ENTRY_POINTS and not kwargs:
        return "vector", f"auto: {name} has a vector entry point srl knows"
    if is_atari_id(name):
        if not envpool_installed():
            return "loop", "auto: an Atari id, EnvPool not installed (pip install 'srl[envpool]')"
        foreign = sorted(set(kwargs) - set(ATARI_TWINS) - set(ENVPOOL_RUN_KWARGS))
        if foreign:
            return "loop", f"auto: an Atari id, but env_kwargs {foreign} have no EnvPool twin"
        return "envpool", "auto: an Atari id and EnvPool installed"
    return "loop", "auto: no natively batched backend known for this env"


def backend_line(name: str, kwargs: dict[str, Any], backend: str) -> str:
    chosen, why = backend_choice(name, kwargs, backend)
    return f"env_backend: {chosen} ({why})"


def single_env_kwargs(kwargs: dict[str, Any], backend: str) -> dict[str, Any]:
    """The env_kwargs of a run stepped with `backend`, for one env of it built on its own (an
    evaluation actor, `srl eval`), which the loop backend builds."""
    if backend not in ("envpool", "auto"):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k not in ENVPOOL_RUN_KWARGS}


def vector_entry_point(name: str) -> str | None:
    spec = gym.envs.registry.get(name)
    entry = spec.vector_entry_point if spec is not None else None
    if isinstance(entry, str) or entry is None:
        return entry
    return f"{entry.__module__}:{entry.__qualname__}"  # type: ignore[attr-defined]  # a registered class or function


def resolve_backend(name: str, kwargs: dict[str, Any], backend: str) -> str:
    """The backend `backend` means for env `name` (auto: `backend_choice`). Refuses a backend the
    env cannot use."""
    if backend not in BACKENDS:
        raise ValueError(f"env_backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "auto":
        return backend_choice(name, kwargs, backend)[0]
    if backend == "vector" and vector_entry_point(name) is None:
        raise ValueError(
            f"env_backend='vector': env {name!r} declares no Gymnasium vector entry point "
            "(CartPole-v1 does); use env_backend=loop, or envpool for EnvPool's ids"
        )
    if backend == "envpool":
        import_envpool()
    return backend


def import_envpool() -> Any:
    try:
        import envpool
    except ImportError as error:
        raise ImportError(f"{ENVPOOL_HINT} (importing envpool failed: {error})") from error
    return envpool


def _cartpole_reset_rows(env: Any, mask: np.ndarray) -> np.ndarray:
    """What CartPoleVectorEnv's own next-step reset does to the masked envs, done now."""
    if not all(hasattr(env, name) for name in ("state", "steps", "prev_done", "low", "high")):
        raise RuntimeError(
            f"this gymnasium's {type(env).__name__} lacks the state srl resets per env "
            f"(gymnasium {gym.__version__}): use env_backend=loop"
        )
    env.state[:, mask] = env.np_random.uniform(low=env.low, high=env.high, size=(4, int(mask.sum())))
    env.steps[mask] = 0
    env.prev_done[mask] = False  # so its next step does not reset them again
    return env.state[:, mask].T.astype(np.float32)


class GymVectorBackend:
    def __init__(self, id: str, num_envs: int, **kwargs: Any) -> None:
        self.env = gym.make_vec(id, num_envs, vectorization_mode="vector_entry_point", **kwargs)
        self.num_envs = num_envs
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        mode = self.env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
        if mode != gym.vector.AutoresetMode.NEXT_STEP:
            self.env.close()
            raise ValueError(f"env_backend='vector': {id!r} auto-resets {mode}; srl converts only next-step")
        self._cartpole = type(self.env.unwrapped).__name__ == "CartPoleVectorEnv"

    def reset(self, seed: int | None) -> np.ndarray:
        return self.env.reset(seed=seed)[0]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.env.step(actions)[:4]

    def reset_rows(self, mask: np.ndarray) -> np.ndarray:
        if self._cartpole:
            return _cartpole_reset_rows(self.env.unwrapped, mask)
        return self.env.reset(options={"reset_mask": mask})[0][mask]

    def close(self) -> None:
        self.env.close()


class EnvPoolBackend:
    """EnvPool in sync mode (one batch = every env, in env id order); env i is seeded seed + i.
    Atari ids take srl.envs.atari's kwargs (ATARI_TWINS) as well as EnvPool's own."""

    def __init__(self, id: str, num_envs: int, **kwargs: Any) -> None:
        self._envpool = import_envpool()
        self.task = id.removeprefix("ALE/") if is_atari_id(id) else id
        if is_atari_id(id):
            kwargs = atari_twins(kwargs)
        self.kwargs = {**(ENVPOOL_ATARI_DEFAULTS if is_atari_id(id) else {}), "num_threads": envpool_threads(num_envs),
                       **kwargs}
        self.num_envs = num_envs
        self.seed: int | None = None
        self.env = self._make(0)
        self.observation_space = self.env.observation_space
        if is_atari_id(id) and self.observation_space.shape[0] == 1:  # one frame: (84, 84) as srl.envs.atari
            space = self.observation_space
            self.observation_space = gym.spaces.Box(space.low[0], space.high[0], space.shape[1:], space.dtype)
        self.action_space = self.env.action_space

    def _make(self, seed: int) -> Any:
        self.seed = seed
        return self._envpool.make_gymnasium(self.task, num_envs=self.num_envs, seed=seed, **self.kwargs)

    def reset(self, seed: int | None) -> np.ndarray:
        if seed is not None and seed != self.seed:  # EnvPool takes its seed when it is built
            self.env.close()
            self.env = self._make(seed)
        return self.env.reset()[0]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.env.step(actions)[:4]

    def reset_rows(self, mask: np.ndarray) -> np.ndarray:
        obs, info = self.env.reset(np.flatnonzero(mask).astype(np.int32))
        return obs[np.argsort(info["env_id"])]

    def close(self) -> None:
        self.env.close()
