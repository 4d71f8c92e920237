"""build_graph builds the policy and the algorithm once to check them, and what only tries weights
on them reuses those (issue 36): a resume's checkpoints, srl eval's. Before, the policy's name was
chosen three times and looked up twice per graph, and a resume built the policy and the algorithm
a second time only to load its checkpoint into them."""

from __future__ import annotations

import pickle
from collections import Counter
from pathlib import Path

import pytest

from srl import checkpoint
from srl.algos.ppo import PPO
from srl.api import registry
from srl.config.load import load_config
from srl.graph import build_graph
from srl.models.mlp import ActorCriticMLP


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of what is built and looked up: policies (actor-critic-mlp), algorithms (ppo), policy lookups."""
    counts: Counter[str] = Counter()
    for cls, key in ((ActorCriticMLP, "policy"), (PPO, "algorithm")):
        original = cls.__init__

        def counted(self, *args, _original=original, _key=key, **kwargs):  # type: ignore[no-untyped-def]
            counts[_key] += 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counted)
    lookup = registry.policies.get

    def looked_up(name: str):  # type: ignore[no-untyped-def]
        counts["policy lookup"] += 1
        return lookup(name)

    monkeypatch.setattr(registry.policies, "get", looked_up)
    return counts


def _config(*overrides: str):  # type: ignore[no-untyped-def]
    return load_config("cartpole-ppo", ["launch.launcher=inline", "monitor.display=off", *overrides])


def test_a_graph_builds_and_looks_up_its_policy_once(built):
    config = _config()
    built.clear()
    graph = build_graph(config)
    assert built == {"policy": 1, "algorithm": 1, "policy lookup": 1}
    assert graph.checked is not None and isinstance(graph.checked.policy, ActorCriticMLP)


def test_a_resume_tries_its_checkpoint_on_the_checked_policy_and_algorithm(built, tmp_path: Path):
    from srl.launch.run import _resume_point

    run_dir = tmp_path / "run"
    first = build_graph(_config(f"run.run_dir={run_dir}"))
    policy, algorithm = first.checked_models()
    run_dir.mkdir()
    first.config.dump_yaml(run_dir / "config.yaml")
    checkpoint.save(run_dir, 5, 640, policy, algorithm.state_dict(), run_id=first.config.run.run_id)
    graph = build_graph(_config(f"run.resume={run_dir}"))
    built.clear()
    assert _resume_point(graph, launch=2) == (640, 5)
    assert built["policy"] == built["algorithm"] == 0


def test_a_graph_sent_to_a_worker_leaves_the_checked_models_behind():
    graph = build_graph(_config())
    sent = pickle.loads(pickle.dumps(graph))
    assert graph.checked is not None and sent.checked is None
    assert sent.workers == graph.workers and sent.policy_fields.keys() == graph.policy_fields.keys()
