"""Built-in policies; importing this package registers them (see srl.api.registry)."""

from srl.models.agent_q import AgentQ
from srl.models.cnn import ActorCriticCNN
from srl.models.mappo import MAPPOPolicy
from srl.models.mlp import ActorCriticMLP
from srl.models.multi_input import MultiInputActorCritic
from srl.models.qmlp import QMLP
from srl.models.random_policy import RandomPolicy
from srl.models.recurrent import RecurrentActorCritic
from srl.models.scripted import Connect4Lookahead, RandomLegal
from srl.models.squashed_gaussian import SquashedGaussianMLP

__all__ = [
    "ActorCriticCNN", "AgentQ", "ActorCriticMLP", "Connect4Lookahead", "MAPPOPolicy", "MultiInputActorCritic", "QMLP",
    "RandomLegal", "RandomPolicy", "RecurrentActorCritic", "SquashedGaussianMLP",
]
