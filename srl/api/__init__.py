"""The contracts users implement: environments, policies, algorithms, and the registries."""

from srl.api.algorithm import Algorithm, AlgorithmConfig
from srl.api.env import Environment, EnvStep, VectorEnv, VectorStep
from srl.api.policy import FieldSpec, Policy
from srl.api.registry import (
    register_algorithm,
    register_env,
    register_experiment,
    register_policy,
    register_worker,
)
from srl.api.worker import Worker

__all__ = [
    "Algorithm",
    "AlgorithmConfig",
    "EnvStep",
    "Environment",
    "FieldSpec",
    "Policy",
    "VectorEnv",
    "VectorStep",
    "Worker",
    "register_algorithm",
    "register_env",
    "register_experiment",
    "register_policy",
    "register_worker",
]
