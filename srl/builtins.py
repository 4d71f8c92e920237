"""Import every built-in registration (envs, policies, algorithms) once. The built-in experiments
register in srl.experiments: they are typed with srl.config's models, and srl.config imports this
module, so they are imported where experiments are looked up (srl.config.load, srl.config.files, srl list)."""

import srl.algos  # noqa: F401
import srl.envs  # noqa: F401
import srl.envs.batched  # noqa: F401
import srl.models  # noqa: F401
import srl.population.league_pool  # noqa: F401  (the "league-pool" policy: it plays with srl.evaluation, which imports srl.models)
