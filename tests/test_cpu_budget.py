"""The fast-test CPU budget (tests/cpu_budget.py) on a small suite of its own, run by pytester."""

from __future__ import annotations

import json
import re

pytest_plugins = ["pytester"]

SUITE = '''
import time

import pytest


def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.fixture(scope="session")
def shared():
    burn(0.1)  # paid once for every test that shares it: not any one test's cost


@pytest.fixture
def own():
    burn(0.1)  # this test's own setup


def test_cheap():
    pass


def test_costly():
    burn(0.1)


@pytest.mark.slow
def test_costly_but_slow():
    burn(0.1)


def test_uses_the_shared_fixture(shared):
    pass


def test_pays_for_its_own_fixture(own):
    pass
'''


def run_suite(pytester, monkeypatch, budget: str):
    pytester.makeini("[pytest]\nmarkers =\n    slow: integration tests\n")
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "cpu.jsonl"
    monkeypatch.setenv("DYNRAG_TEST_CPU_BUDGET", budget)
    monkeypatch.setenv("DYNRAG_TEST_CPU_REPORT", str(report))
    result = pytester.runpytest_inprocess("-p", "tests.cpu_budget", "-q")
    spent = {json.loads(line)["test"].split("::")[1]: json.loads(line)["cpu_s"] for line in report.read_text().splitlines()}
    return result, spent


def test_a_fast_test_over_the_budget_fails_naming_itself_and_its_cpu(pytester, monkeypatch):
    result, spent = run_suite(pytester, monkeypatch, "0.05")
    result.assert_outcomes(passed=3, failed=2)
    failed = {r.nodeid.split("::")[1]: str(r.longrepr) for r in result.reprec.getreports("pytest_runtest_logreport")
              if r.when == "call" and r.failed}
    assert set(failed) == {"test_costly", "test_pays_for_its_own_fixture"}
    assert re.search(r"test_suite\.py::test_costly used 0\.[12] s of CPU, over the fast-test budget of 0\.05 s",
                     failed["test_costly"])
    assert "@pytest.mark.slow" in failed["test_costly"]
    # A slow test may cost what it costs; a shared fixture is not charged to the test that came first.
    assert spent["test_costly_but_slow"] >= 0.09 and spent["test_uses_the_shared_fixture"] < 0.05
    assert spent["test_pays_for_its_own_fixture"] >= 0.09


def test_the_budget_applies_to_suite_runs_or_when_given():
    from tests.cpu_budget import MIN_TESTS, budget_applies

    assert budget_applies(False, MIN_TESTS) and budget_applies(True, 1)
    assert not budget_applies(False, MIN_TESTS - 1)  # one file: its first test pays the imports


def test_a_budget_of_zero_turns_the_check_off(pytester, monkeypatch):
    result, spent = run_suite(pytester, monkeypatch, "0")
    result.assert_outcomes(passed=5)
    assert spent["test_costly"] >= 0.09 and spent["test_cheap"] < 0.04
