"""Built-in algorithms; importing this package registers them (see srl.api.registry)."""

from srl.algos.gae import compute_gae
from srl.algos.none import NoTraining
from srl.algos.ppo import PPO, PPOConfig

__all__ = ["PPO", "NoTraining", "PPOConfig", "compute_gae"]

from srl.algos.appo import APPO, APPOConfig, IMPALAConfig
from srl.algos.vtrace import compute_vtrace

__all__ += ["APPO", "APPOConfig", "IMPALAConfig", "compute_vtrace"]
