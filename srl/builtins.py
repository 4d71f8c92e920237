"""Import every built-in registration (envs, policies, algorithms, experiments) once."""

import srl.algos  # noqa: F401
import srl.envs  # noqa: F401
import srl.envs.batched  # noqa: F401
import srl.experiments  # noqa: F401
import srl.models  # noqa: F401
