"""A test may skip only for missing hardware: every other skip is turned into a failure.

`[test]` installs every package the tests import, so a skip for a missing package means an install
step is missing (CI would be green only where the package happens to be installed). Tests that
need hardware carry `@pytest.mark.gpu` and are skipped, with that reason, where torch sees no CUDA
device; any other skip, at collection (`pytest.importorskip` at module level) or in a test,
fails with the reason it gave.
"""

from __future__ import annotations

import pytest

NO_CUDA = "hardware: no CUDA device"


def _cuda_available() -> bool:
    from srl import devices

    # counted through NVML: torch.cuda.is_available() would initialise CUDA in this process, and
    # the workers that the local launcher forks from it could then not use CUDA at all
    return devices.cuda_count() > 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not _cuda_available():
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=NO_CUDA))


def _allowed(report: pytest.TestReport | pytest.CollectReport) -> bool:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.endswith(NO_CUDA)


def _fail(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped, and only missing hardware may skip a test: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail") and not _allowed(report):
        _fail(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> object:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not _allowed(report):
        _fail(report)
