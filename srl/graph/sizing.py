"""How many actors, how many envs each, on a machine of so many cores (`launch.layout=machine`).

A run's default layout is one actor of 16 envs (launch.num_actor_workers, dataflow.envs_per_actor):
right for a laptop, a tenth of a 16-core machine. `launch.layout=machine` derives the fields the
config leaves unset from the machine instead (`machine_layout`, a pure function of the cores, a GPU
and the env's kind), as Sample Factory sizes its rollout workers:

- cores are first left for the rest of the run: one for the controller and the parameter service
  (both mostly wait), one for the trainer, and with a GPU one for the policy worker that feeds it;
- an env stepped in C++ threads (EnvPool, a Gymnasium vector entry point: `batched`) gets fewer,
  bigger actors: 32 envs each (a ring group of 16-32 envs amortises the actor's Python work per
  step), one actor per 2 of the cores left, each of its pools stepping on its share of them
  (EnvPool's num_threads: `env_threads`). Not one per 4 or more: in sync mode an actor's pool
  threads idle while its Python thread records the step, and more actors overlap that work; on 2
  cores, 16 Pong envs stepped at 2,440 env steps/s on 1 EnvPool thread and 3,500 on 2;
- a Python env stepped one after another (`loop`) gets one actor per core left, 16 envs each;
- actors run at a lower OS priority (launch.actor_niceness, here 5 where a run has 8 cores or more)
  so that the policy worker and the trainer, which every actor waits on, are not starved by them.

On 2 cores nothing is left to share: one actor, the default one. Under Ray with a cluster
(ray_address) the controller's machine is not the cluster's, so the layout stays as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from srl.config import ExperimentConfig

EnvKind = Literal["batched", "loop"]
RESERVED_CORES = 2  # the controller with the parameter service, and the trainer
BATCHED_ENVS = 32  # envs per actor where the env steps in C++ threads
LOOP_ENVS = 16  # envs per actor where Python steps them one after another
CORES_PER_BATCHED_ACTOR = 2  # the actor's Python thread and its pools' threads
ACTOR_NICENESS = 5  # on machines with MANY_CORES or more
MANY_CORES = 8


@dataclass(frozen=True)
class ActorSizing:
    num_actor_workers: int
    envs_per_actor: int
    env_threads: int  # EnvPool threads of each of an actor's pools
    actor_niceness: int


def machine_layout(cores: int, gpu: bool, env_kind: EnvKind) -> ActorSizing:
    """The layout for a machine of `cores` CPUs (with a `gpu` for the policy worker and trainer)
    and an env of `env_kind` (see the module's docstring)."""
    reserved = RESERVED_CORES + int(gpu)
    actor_cores = max(1, cores - reserved)
    niceness = ACTOR_NICENESS if cores >= MANY_CORES else 0
    if env_kind == "batched":
        actors = max(1, actor_cores // CORES_PER_BATCHED_ACTOR)
        return ActorSizing(actors, BATCHED_ENVS, max(1, actor_cores // actors), niceness)
    return ActorSizing(actor_cores, LOOP_ENVS, 1, niceness)


def env_threads(cores: int, num_actor_workers: int, envs: int) -> int:
    """EnvPool threads of one pool of `envs` in an actor of `num_actor_workers`: the actor's share
    of the cores (its ring groups step one after another, so each pool may take all of it), at
    most one per env."""
    return max(1, min(envs, cores // num_actor_workers))


def choice_lines(config: ExperimentConfig) -> list[str]:
    """What srl chose for the run where the config let it (srl run, srl show, srl graph): the env backend
    (env_backend=auto: srl.envs.native_backends) and the machine's layout (srl.graph.sizing)."""
    from srl.devices import cpu_count
    from srl.envs.native_backends import backend_line

    lines = [] if config.policies or config.pod.enabled else [backend_line(config.env, config.env_kwargs, config.env_backend)]
    if config.launch.layout == "machine" and not config.pod.enabled:
        launch = config.launch
        lines.append(f"layout: launch.num_actor_workers={launch.num_actor_workers} "
                     f"dataflow.envs_per_actor={config.dataflow.envs_per_actor} launch.actor_niceness={launch.actor_niceness} "
                     f"(launch.layout=machine: {cpu_count()} cores; fields the config sets are kept)")
    return lines
