"""Built-in policies; importing this package registers them (see srl.api.registry)."""

from srl.models.mlp import ActorCriticMLP

__all__ = ["ActorCriticMLP"]
