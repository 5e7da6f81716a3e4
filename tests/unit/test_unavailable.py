"""A missing prerequisite raised anywhere (simulation.prerequisites.Unavailable) skips a test locally and fails it in
CI."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from simulation.prerequisites import Unavailable, unavailable
from tests import conftest


def report_for(error: BaseException, monkeypatch, ci: bool):
    if ci:
        monkeypatch.setenv("CI", "true")
    else:
        monkeypatch.delenv("CI", raising=False)
    report = SimpleNamespace(outcome="failed", longrepr="traceback")
    item = SimpleNamespace(path="tests/x.py", location=("tests/x.py", 7, "test_x"), stash={}, fixturenames=())
    call = SimpleNamespace(excinfo=pytest.ExceptionInfo.from_exception(error))
    wrapper = conftest.pytest_runtest_makereport(item, call)
    next(wrapper)
    with pytest.raises(StopIteration):
        wrapper.send(SimpleNamespace(get_result=lambda: report))
    return report


def raised(reason: str) -> Unavailable:
    try:
        unavailable(reason)
    except Unavailable as error:
        return error
    raise AssertionError("unavailable() must raise")


def test_a_missing_tool_is_a_skip_with_its_reason_locally(monkeypatch):
    report = report_for(raised("helm is missing"), monkeypatch, ci=False)
    assert report.outcome == "skipped" and "helm is missing" in report.longrepr[2]


def test_a_missing_tool_fails_in_ci(monkeypatch):
    assert report_for(raised("helm is missing"), monkeypatch, ci=True).outcome == "failed"


def test_other_errors_stay_failures(monkeypatch):
    try:
        raise RuntimeError("boom")
    except RuntimeError as error:
        assert report_for(error, monkeypatch, ci=False).outcome == "failed"
