"""A load reads each input once (issue 36): the `key=value` overrides are translated from old keys
once, and each module that `modules=` names goes through import_modules once. Before, the whole
merged config went through srl.config.checks.build_config, which translated and imported again."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

import srl.config
from srl.config.load import load_config


def _count_calls(monkeypatch: pytest.MonkeyPatch, original: Callable[..., Any]) -> list[Any]:
    """The first argument of every call of `original`, wherever an srl module holds it."""
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(list(args[0]) if isinstance(args[0], list) else args[0])  # as it was at the call
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("srl") and getattr(module, original.__name__, None) is original:
            monkeypatch.setattr(module, original.__name__, counted)
    return calls


def test_a_load_translates_the_overrides_once(monkeypatch):
    translated = _count_calls(monkeypatch, srl.config.translate_moved)
    config = load_config("cartpole-ppo", ["total_env_steps=5000", "launch.launcher=inline"])
    assert config.stop.total_env_steps == 5000  # the old key was read, as its note says
    assert len(translated) == 1, translated


def test_a_load_imports_each_module_once(monkeypatch):
    imported = _count_calls(monkeypatch, srl.config.import_modules)
    config = load_config("cartpole-ppo", ["modules=json,csv", "launch.launcher=inline"])
    assert config.modules == ["json", "csv"]
    entries = [e for names in imported for e in srl.config.module_entries(names)]
    assert sorted(entries) == ["csv", "json"], imported


def test_an_experiment_files_modules_are_imported_once(monkeypatch, tmp_path):
    """The file imports its modules as it is read (they may register its base); the load does not again."""
    file = tmp_path / "exp.yaml"
    file.write_text("base: cartpole-ppo\nmodules: [json]\nlaunch: {launcher: inline}\n")
    imported = _count_calls(monkeypatch, srl.config.import_modules)
    assert load_config(str(file)).modules == ["json"]
    assert [e for names in imported for e in srl.config.module_entries(names)] == ["json"], imported


def test_build_config_still_reads_values_as_given(monkeypatch):
    """What other callers hand build_config (a sweep's, srl eval's saved values) is read as given:
    old keys translated, modules imported."""
    from srl.config.checks import build_config

    imported = _count_calls(monkeypatch, srl.config.import_modules)
    config = build_config({"total_env_steps": 7000, "modules": ["json"]})
    assert config.stop.total_env_steps == 7000 and imported == [["json"]]
