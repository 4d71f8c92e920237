"""Built-in algorithms; importing this package registers them (see srl.api.registry)."""

from srl.algos.appo import APPO, APPOConfig, IMPALAConfig
from srl.algos.dqn import DQN, DQNConfig
from srl.algos.gae import compute_gae
from srl.algos.none import NoTraining
from srl.algos.ppo import PPO, PPOConfig
from srl.algos.qmix import QMIX, QMIXConfig, VDNConfig
from srl.algos.r2d2 import R2D2, R2D2Config
from srl.algos.sac import SAC, SACConfig
from srl.algos.vtrace import compute_vtrace

__all__ = [
    "APPO", "APPOConfig", "DQN", "DQNConfig", "IMPALAConfig", "NoTraining", "PPO", "PPOConfig", "QMIX", "QMIXConfig",
    "R2D2", "R2D2Config", "SAC", "SACConfig", "VDNConfig", "compute_gae", "compute_vtrace",
]
