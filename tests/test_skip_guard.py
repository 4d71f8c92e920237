"""Only missing hardware may skip a test: a skip for a missing package (or any other reason) fails."""

from __future__ import annotations

import pytest
import skip_guard

CONFTEST = "from skip_guard import *  # noqa: F401,F403\n"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setattr(skip_guard, "_cuda_available", lambda: False)  # the same on every machine
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    gpu: needs a CUDA device\n")
    return pytester


def test_a_module_skipped_at_collection_fails(suite: pytest.Pytester) -> None:
    # a throwaway suite of pytester's whose module skips itself at collection, as
    # pytest.importorskip does for a missing package: the guard must turn that skip into an error
    # (this test itself never skips, and nothing is imported that [test] lacks)
    suite.makepyfile(
        test_skips_module='import pytest\npytest.skip("a module-level skip", allow_module_level=True)\n\n'
        "def test_x():\n    pass\n"
    )
    result = suite.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*only missing hardware may skip a test*a module-level skip*"])


def test_a_test_that_skips_itself_fails(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        test_skips="""
import pytest

def test_inside():
    pytest.skip("no envpool")

@pytest.mark.skipif(True, reason="no ale_py")
def test_marked():
    pass

@pytest.mark.xfail(reason="known bug", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    pass
"""
    )
    result = suite.runpytest()
    result.assert_outcomes(failed=1, errors=1, passed=1, xfailed=1)  # a skipif mark skips at set-up
    result.stdout.fnmatch_lines(["*only missing hardware may skip a test: Skipped: no envpool*"])
    result.stdout.fnmatch_lines(["*only missing hardware may skip a test: Skipped: no ale_py*"])


def test_gpu_tests_skip_where_there_is_no_cuda(suite: pytest.Pytester) -> None:
    suite.makepyfile(test_gpu="import pytest\n\n@pytest.mark.gpu\ndef test_on_cuda():\n    assert False\n")
    result = suite.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([f"*{skip_guard.NO_CUDA}*"])


def test_gpu_tests_run_where_there_is_cuda(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skip_guard, "_cuda_available", lambda: True)
    suite.makepyfile(test_gpu="import pytest\n\n@pytest.mark.gpu\ndef test_on_cuda():\n    assert False\n")
    suite.runpytest().assert_outcomes(failed=1)
