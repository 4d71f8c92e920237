"""MultiDiscrete and MultiBinary actions: factorised categoricals (srl.models.heads) for PPO, APPO
and recurrent PPO, int64 on the wire and the space's dtype at the env, refused before launch by
the algorithms that cannot train them.

Learning runs use fixed seeds and env-step budgets on the envs of tests/multi_action_env.py,
measured once (inline launcher, seed 1): on MatchTargets (nvec 3, 4, 2; random play 3.6 of 10)
PPO reaches a mean-100 return of 9.0 before 150k env steps (seeds 1-3; 9.6 at 150k), APPO 6.0
and recurrent PPO 6.8 at 60k; on match-bits (random 5 of 10) PPO reaches 8.3 at 30k."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import multi_action_env  # noqa: F401  (registers srl-test/MatchTargets-v0 and match-bits)
import numpy as np
import pytest
import torch
from torch.distributions import Categorical

from srl.config.checks import build_config
from srl.envs import make_vector_env
from srl.evaluate import evaluate_run
from srl.graph import space_spec
from srl.launch.run import run_experiment
from srl.models.heads import categorical_head
from srl.models.mlp import ActorCriticMLP
from srl.models.recurrent import RecurrentActorCritic

TARGETS = multi_action_env.MATCH_TARGETS
START = [0, 1, -1]  # MatchTargets with offsets: actions are start + index
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def by_hand(space: gym.Space, logits: torch.Tensor, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log-prob and entropy from torch.distributions: one Categorical per entry, summed."""
    nvec = np.full(space.shape, 2) if isinstance(space, gym.spaces.MultiBinary) else space.nvec
    start = np.broadcast_to(getattr(space, "start", 0), nvec.shape).reshape(-1)
    flat = action.reshape(*logits.shape[:-1], -1)
    log_prob = entropy = 0
    for d, part in enumerate(logits.split(nvec.reshape(-1).tolist(), dim=-1)):
        dist = Categorical(logits=part)
        log_prob = log_prob + dist.log_prob(flat[..., d] - int(start[d]))
        entropy = entropy + dist.entropy()
    return log_prob, entropy


SPACES = [
    gym.spaces.MultiDiscrete([3, 4, 2], start=START),
    gym.spaces.MultiDiscrete([[2, 5], [3, 1]]),
    gym.spaces.MultiBinary(4),
    gym.spaces.MultiBinary([2, 3]),
]


@pytest.mark.parametrize("space", SPACES, ids=str)
def test_log_prob_and_entropy_match_per_entry_categoricals(space):
    torch.manual_seed(0)
    head = categorical_head(space)
    logits = 3 * torch.randn(7, 5, head.logits_dim)  # [T, B, logits] as a recurrent unroll has them
    action, log_prob = head.act(logits)
    assert action.shape == (7, 5, *space.shape) and action.dtype == torch.int64
    assert all(space.contains(a.astype(space.dtype)) for a in action.reshape(35, *space.shape).numpy())
    expected_log_prob, expected_entropy = by_hand(space, logits, action)
    torch.testing.assert_close(log_prob, expected_log_prob)
    log_prob, entropy = head.evaluate(logits, action)
    torch.testing.assert_close(log_prob, expected_log_prob)
    torch.testing.assert_close(entropy, expected_entropy)


def test_deterministic_actions_are_the_argmax_of_each_entry():
    space = gym.spaces.MultiDiscrete([3, 4, 2], start=START)
    logits = torch.tensor([[0.0, 5.0, 1.0, 2.0, 0.0, 0.0, 9.0, 3.0, -3.0]])
    action, _ = categorical_head(space).act(logits, deterministic=True)
    assert action.tolist() == [[1, 3 + 1, 0 - 1]]


def test_samples_follow_each_entrys_probabilities_and_never_pick_padding():
    torch.manual_seed(0)
    space = gym.spaces.MultiDiscrete([2, 4])  # entry 0 is padded to 4 slots
    logits = torch.tensor([1.0, -1.0, 0.0, 1.0, 2.0, -2.0]).expand(40_000, 6)
    action, _ = categorical_head(space).act(logits)
    for d, part in enumerate(logits[0].split([2, 4])):
        counts = torch.bincount(action[:, d], minlength=4)[: len(part)]
        assert counts.sum() == len(action)  # nothing beyond the entry's own size
        torch.testing.assert_close(counts / len(action), part.softmax(-1), atol=0.01, rtol=0)


def test_mlp_policy_scores_its_own_actions():
    torch.manual_seed(0)
    space = gym.spaces.MultiDiscrete([3, 4, 2], start=START)
    policy = ActorCriticMLP(OBS, space)
    obs = torch.randn(16, 3)
    out = policy.rollout(obs)
    assert out["action"].shape == (16, 3)
    again = policy.analyze(obs, out["action"])
    torch.testing.assert_close(again["log_prob"], out["log_prob"])
    expected_log_prob, expected_entropy = by_hand(space, policy._forward(obs)[0], out["action"])
    torch.testing.assert_close(again["entropy"], expected_entropy)
    assert policy.rollout(obs, deterministic=True)["action"].shape == (16, 3)


def test_recurrent_policy_scores_its_own_actions_through_time():
    torch.manual_seed(0)
    policy = RecurrentActorCritic(OBS, gym.spaces.MultiBinary(4), cell="gru", hidden=16)
    steps, rows = 5, 3
    obs, first = torch.randn(steps, rows, 3), torch.zeros(steps, rows, dtype=torch.bool)
    first[0] = True
    state, actions, log_probs = policy.initial_state(rows), [], []
    start_state = state
    for t in range(steps):
        out, state = policy.rollout_recurrent(obs[t], state, first[t])
        actions.append(out["action"])
        log_probs.append(out["log_prob"])
    again = policy.analyze_sequence(obs, torch.stack(actions), start_state, first)
    assert torch.stack(actions).shape == (steps, rows, 4)
    torch.testing.assert_close(again["log_prob"], torch.stack(log_probs))
    assert again["entropy"].shape == (steps, rows)


@pytest.mark.parametrize("name, kwargs, dtype", [(TARGETS, {"start": START}, np.int64), ("match-bits", {}, np.int8)])
def test_envs_get_actions_of_their_spaces_dtype_and_shape(name, kwargs, dtype):
    """srl carries int64 (space_spec); the env backends hand each env its space's dtype (the
    envs raise on anything else)."""
    venv = make_vector_env(name, kwargs, num_envs=3)
    try:
        assert space_spec(venv.action_space).dtype == np.int64
        assert space_spec(venv.action_space).shape == venv.action_space.shape
        assert venv.action_space.dtype == dtype
        obs = venv.reset(seed=0)
        policy = ActorCriticMLP(venv.observation_space, venv.action_space)
        for _ in range(12):  # past an episode's end (10 steps): auto-reset on the way
            obs = venv.step(policy.rollout(torch.from_numpy(obs))["action"].numpy()).obs
    finally:
        venv.close()


def learn(run_dir: Path, env: str, algorithm: str, steps: int, policy: str = "actor-critic-mlp", **values) -> dict:
    """A fixed-seed run on the inline launcher; its summary."""
    config = {
        "experiment": "multi-actions", "env": env, "launcher": "inline", "seed": 1, "display": "off",
        "run_dir": str(run_dir), "num_actor_workers": 1, "envs_per_actor": 16, "ring_splits": 1,
        "inference": "inline", "sample_length": 32, "segment_slots": 1, "batch_segments": 1, "max_policy_lag": 5,
        "total_env_steps": steps, "algorithm": algorithm, "policy": policy,
        "algo": {"lr": 1e-3, "epochs": 4, "num_minibatches": 1 if algorithm != "ppo" else 4}, **values,
    }
    assert run_experiment(build_config(config)) == 0
    return json.loads((run_dir / "summary.json").read_text())


RANDOM_TARGETS = 10 * np.mean([1 / 3, 1 / 4, 1 / 2])  # 3.6: each entry right by chance


def test_random_play_scores_what_the_thresholds_are_measured_against(tmp_path):
    summary = learn(tmp_path / "run", TARGETS, "none", 10_000, policy="random", algo={})
    assert abs(summary["episode_return_mean"] - RANDOM_TARGETS) < 0.5, summary


def test_ppo_learns_a_multidiscrete_action_space_with_offsets(tmp_path):
    run_dir = tmp_path / "run"
    summary = learn(run_dir, TARGETS, "ppo", 150_000, env_kwargs={"start": START}, target_return=9.0)
    assert summary["episode_return_mean"] >= 9.0 and summary["stop_reason"].startswith("target_return"), summary
    result = evaluate_run(run_dir, episodes=5, seed=0)  # srl eval: the argmax of each entry
    assert result["return_mean"] >= 9.0, result


@pytest.mark.parametrize("algorithm, policy, threshold", [
    ("appo", "actor-critic-mlp", 5.0), ("ppo", "recurrent-actor-critic", 5.5),
])  # fmt: skip
def test_appo_and_recurrent_ppo_improve_on_random_play(tmp_path, algorithm, policy, threshold):
    algo = {"lr": 1e-3, "epochs": 4, "num_minibatches": 1, **({"anneal_lr": False} if "recurrent" in policy else {})}
    summary = learn(tmp_path / "run", TARGETS, algorithm, 60_000, policy=policy, algo=algo)
    assert summary["episode_return_mean"] >= threshold > RANDOM_TARGETS + 1, summary


def test_ppo_learns_multibinary_actions(tmp_path):
    summary = learn(tmp_path / "run", "match-bits", "ppo", 30_000, algo={"lr": 1e-3, "epochs": 4, "num_minibatches": 1})
    assert summary["episode_return_mean"] >= 7.0, summary  # random: 5


@pytest.mark.parametrize("experiment, algorithm, fix", [("cartpole-dqn", "dqn", "Discrete"), ("pendulum-sac", "sac", "Box")])
def test_algorithms_without_factorised_heads_refuse_before_launch(tmp_path, experiment, algorithm, fix):
    run_dir = tmp_path / "never"
    proc = subprocess.run(
        [sys.executable, "-m", "srl.cli", "run", experiment, f"env={TARGETS}", "modules=multi_action_env",
         f"run.run_dir={run_dir}"],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent,
    )
    assert proc.returncode == 2, proc.stderr
    assert not run_dir.exists() and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line, line
    assert f"env '{TARGETS}' has a MultiDiscrete action space, algorithm '{algorithm}' needs {fix} " in line, line
    fit = line.split("(algorithms that fit MultiDiscrete: ")[1].split(")")[0].split(", ")
    assert {"appo", "ppo"} <= set(fit) and algorithm not in fit, line


def test_the_custom_env_page_multidiscrete_example_learns_and_dqn_is_refused(tmp_path):
    """docs/custom.md section 5, as part of the page's my_rl.py (tests/test_custom_docs.py)."""
    from test_custom_docs import doc_module_code, srl_env, srl_script

    (tmp_path / "my_rl.py").write_text(doc_module_code())
    run = [srl_script(), "run", "pick-bins-ppo", "modules=my_rl", "run.seed=1", "monitor.display=off"]
    proc = subprocess.run([*run, "run.run_dir=run"], capture_output=True, text=True, timeout=600, env=srl_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stop_reason"].startswith("target_return") and summary["env_steps"] <= 200_000, summary
    proc = subprocess.run([*run, "algorithm=dqn", "run.run_dir=never"], capture_output=True, text=True, timeout=120,
                          env=srl_env(), cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "never").exists(), proc.stderr
    assert "env 'PickBins-v0' has a MultiDiscrete action space, algorithm 'dqn' needs Discrete" in proc.stderr


def test_the_action_space_table_in_the_docs_is_what_the_classes_declare():
    import srl.builtins  # noqa: F401  (registers the algorithms and policies)
    from srl.api import registry
    from srl.config.compat import fitting_policies

    doc = (Path(__file__).parent.parent / "docs" / "spaces.md").read_text()
    header = "| action space | ppo | appo | impala | dqn | r2d2 | sac |"
    assert header in doc
    algorithms = header.strip("| ").split(" | ")[1:]
    assert set(algorithms) <= set(registry.algorithms.names())
    spaces = [gym.spaces.Discrete(2), gym.spaces.MultiDiscrete([2, 3]), gym.spaces.MultiBinary(2), OBS]
    for space in spaces:
        builtin = [[p for p in fitting_policies(a, space) if registry.policies.get(p).__module__.startswith("srl.")]
                   for a in algorithms]
        cells = [", ".join(names) or "—" for names in builtin]
        row = f"| {type(space).__name__} | " + " | ".join(cells) + " |"
        assert row in doc, f"docs/spaces.md should have the row\n{row}"
