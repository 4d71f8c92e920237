"""Several policies in one run (config `policies` + `policy_mapping`): one lane per policy.

A lane is the one-policy dataflow of srl.graph for the agents mapped to that policy: its own
policy workers, trainer (and buffer, with replay), parameter service and checkpoints, declared by
the same `declare_streams` on a graph of its own (`srl.graph.Lane`, whose config is the run's with
the policy's settings: `policy_config` here, with the mapping's and the spaces' checks;
`lanes_graph` there). The actors are shared: each steps every agent of its envs and hands each lane
its agents' rows (srl.workers.lanes). In the run's graph a lane's streams and shared
blocks carry its prefix ("predator.trainer.samples") and its workers numbers of their own role
("trainer:1" is the prey's first trainer when the predator has one), so worker names stay
role:index everywhere (reports, restarts, placement); `Lane.names` maps the lane's own names
("trainer:0") to the run's. A run of one policy is a lane too: one for every agent, under the
run's own names (the empty prefix, `srl.graph.one_lane`), so every path above the kernels is one.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import gymnasium as gym
from pydantic import ValidationError

from srl.api import registry
from srl.config import ConfigError, ExperimentConfig, PolicySpec, format_error, lock_step_batch_segments
from srl.envs.central_state import AgentStateBox

POLICIES_DIR = "policies"  # run_dir/policies/<name>: a lane's checkpoints


def policy_config(config: ExperimentConfig, name: str) -> ExperimentConfig:
    """The run's config as policy `name`'s lane sees it: its policy, algorithm and hyperparameters
    (over the run's), its trainer and policy worker counts, its checkpoints in run_dir/policies/name."""
    spec = config.policies[name]
    # one that only acts learns nothing: whatever it is, it is checked with no algorithm (srl.algos.none)
    algorithm = (spec.algorithm or config.algorithm) if spec.trains else "none"
    try:
        entry = registry.algorithms.get(algorithm)
    except registry.UnknownNameError as e:
        raise ConfigError(f"field 'policies.{name}.algorithm': {e}") from None
    base = config.algo_config.model_dump() if algorithm == config.algorithm else {}
    try:
        algo = entry.config_cls.model_validate({**base, **spec.algo} if spec.trains else {})
    except ValidationError as e:
        raise ConfigError(format_error(e, f"policies.{name}.algo.", entry.config_cls)) from None
    launch = config.launch.model_copy(update={
        "num_trainers": spec.num_trainers or config.launch.num_trainers,
        "num_policy_workers": spec.num_policy_workers or config.launch.num_policy_workers,
    })  # fmt: skip
    flow = config.dataflow
    if config.run.deterministic:  # each of its trainers takes one segment of each of its actors' groups (srl.config.checks)
        flow = flow.model_copy(update={"batch_segments": lock_step_batch_segments(launch, flow)})
    run_dir = None if config.run.run_dir is None else str(Path(config.run.run_dir) / POLICIES_DIR / name)
    resume = None if config.run.resume is None else str(Path(config.run.resume) / POLICIES_DIR / name)
    policy, kwargs = network(config, spec)
    if spec.league is not None:  # the snapshots' network is the learner's (srl.population.league_pool)
        learned, learned_kwargs = network(config, config.policies[spec.league.of])
        policy, kwargs = "league-pool", {"policy": learned, "policy_kwargs": learned_kwargs,
                                         "scripted": list(spec.league.scripted)}
    return config.model_copy(update={
        "policy": policy, "policy_kwargs": kwargs,
        "algorithm": algorithm, "algo": algo, "launch": launch, "dataflow": flow, "policies": {}, "policy_mapping": {},
        "eval": config.eval.model_copy(update={"episodes": 0}),  # the run's evaluator plays every lane (srl.graph)
        "extra_workers": [w.model_copy(update={"policy": None}) for w in config.extra_workers if w.policy == name],
        "run": config.run.model_copy(update={"run_dir": run_dir, "resume": resume}),
    })  # fmt: skip


def network(config: ExperimentConfig, spec: PolicySpec) -> tuple[str, dict]:
    """A policy's network and its kwargs: the run's where it names none (kwargs the run's only where
    the network is the run's)."""
    policy = spec.policy or config.policy
    if spec.policy_kwargs is not None:
        return policy, spec.policy_kwargs
    return policy, config.policy_kwargs if policy == config.policy else {}


VERSION = "version"  # an inference slot's policy version


def lane_column(policy: str, column: str) -> str:
    """Where the actors' full rows keep a policy's own column (srl.workers.lanes)."""
    return f"{policy}:{column}"


def map_agents(config: ExperimentConfig, agents: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """policy -> the indices of its agents, by the first policy_mapping entry each agent matches;
    ConfigError for an agent no entry maps, or a policy no agent is mapped to."""
    mapped = {a: next((p for pattern, p in config.policy_mapping.items() if fnmatch.fnmatchcase(a, pattern)), None)
              for a in agents}
    for agent, policy in mapped.items():
        if policy is None:
            raise ConfigError(f"field 'policy_mapping': agent {agent!r} of env {config.env!r} matches no entry "
                              f"({list(config.policy_mapping)}); the env's agents: {list(agents)}")
    mine = {p: tuple(i for i, a in enumerate(agents) if mapped[a] == p) for p in config.policies}
    unused = [p for p, rows in mine.items() if not rows]
    if unused:
        raise ConfigError(f"field 'policies': {unused} act for no agent: policy_mapping maps the env's agents "
                          f"{list(agents)} as {mapped}")
    return mine


def lane_spaces(
    name: str, rows: tuple[int, ...], agents: tuple[str, ...], spaces: dict[str, tuple[gym.Space, gym.Space]]
) -> tuple[gym.Space, gym.Space]:
    """The one observation and action space of a policy's agents; ConfigError where they differ."""
    first = agents[rows[0]]
    for i in rows[1:]:
        if spaces[agents[i]] != spaces[first]:
            (o1, a1), (o2, a2) = spaces[first], spaces[agents[i]]
            raise ConfigError(
                f"field 'policy_mapping': policy {name!r} acts for agents {first!r} (observation {o1}, action {a1}) "
                f"and {agents[i]!r} (observation {o2}, action {a2}); one policy needs agents of one observation and "
                "action space: map them to different policies"
            )
    observation, action = spaces[first]
    if isinstance(observation, AgentStateBox):  # its team: the agents mapped to it (QMIX mixes their Qs)
        observation = observation.of_team(len(rows))
    return observation, action


