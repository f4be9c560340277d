"""The fast-test CPU budget (tests/cpu_budget.py) on a small suite of its own, run by pytester: it lists
costly fast tests always and fails one only past a factor of the budget that only `make test-fast` sets."""

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


def run_suite(pytester, monkeypatch, budget: str, fail_at: str | None = None):
    pytester.makeini("[pytest]\nmarkers =\n    slow: integration tests\n")
    pytester.makepyfile(test_suite=SUITE)
    report = pytester.path / "cpu.jsonl"
    monkeypatch.setenv("DYNRAG_TEST_CPU_BUDGET", budget)
    monkeypatch.setenv("DYNRAG_TEST_CPU_REPORT", str(report))
    if fail_at is None:
        monkeypatch.delenv("DYNRAG_TEST_CPU_FAIL_AT", raising=False)
    else:
        monkeypatch.setenv("DYNRAG_TEST_CPU_FAIL_AT", fail_at)
    result = pytester.runpytest_inprocess("-p", "tests.cpu_budget", "-q")
    spent = {json.loads(line)["test"].split("::")[1]: json.loads(line)["cpu_s"] for line in report.read_text().splitlines()}
    return result, spent


def failures(result) -> dict[str, str]:
    return {r.nodeid.split("::")[1]: str(r.longrepr) for r in result.reprec.getreports("pytest_runtest_logreport")
            if r.when == "call" and r.failed}


def test_without_a_fail_factor_a_costly_test_is_listed_but_passes(pytester, monkeypatch):
    result, spent = run_suite(pytester, monkeypatch, "0.02")
    result.assert_outcomes(passed=5)
    listed = result.stdout.str().split("fast tests over the CPU budget of 0.02 s")[1]
    assert "no test fails for it here" in listed.splitlines()[0]
    ranked = [line.split()[-1].split("::")[1] for line in listed.splitlines()[1:3]]
    assert set(ranked) == {"test_costly", "test_pays_for_its_own_fixture"}
    assert "test_costly_but_slow" not in listed and "test_cheap" not in listed.split("CPU:")[0]
    assert re.search(r"^CPU: [\d.]+ s in all, 5 tests passed", result.stdout.str(), re.M)
    # A slow test may cost what it costs; a shared fixture is not charged to the test that came first.
    assert spent["test_costly_but_slow"] >= 0.09 and spent["test_uses_the_shared_fixture"] < 0.05
    assert spent["test_pays_for_its_own_fixture"] >= 0.09


def test_with_a_fail_factor_only_a_test_past_it_fails_naming_itself_and_its_cpu(pytester, monkeypatch):
    # 0.1 s of work: past 3 x 0.02 s, so it fails; within 3 x 0.05 s, so it is only listed.
    result, _ = run_suite(pytester, monkeypatch, "0.02", fail_at="3")
    result.assert_outcomes(passed=3, failed=2)
    failed = failures(result)
    assert set(failed) == {"test_costly", "test_pays_for_its_own_fixture"}
    assert re.search(r"test_suite\.py::test_costly used 0\.[12] s of CPU, 3 times the fast-test budget of 0\.02 s",
                     failed["test_costly"])
    assert "@pytest.mark.slow" in failed["test_costly"]
    result, _ = run_suite(pytester, monkeypatch, "0.05", fail_at="3")
    result.assert_outcomes(passed=5)
    assert "a fast test fails at 3x" in result.stdout.str()


def test_the_verdict_needs_a_factor_and_a_cost_past_it():
    from tests.cpu_budget import fails

    assert not fails(14.9, 5, 3) and fails(15.1, 5, 3)
    assert not fails(1000, 5, None)  # make test: never
    assert not fails(1000, 0, 3)  # a budget of 0 is off


def test_the_budget_applies_to_suite_runs_or_when_given():
    from tests.cpu_budget import MIN_TESTS, budget_applies

    assert budget_applies(False, MIN_TESTS) and budget_applies(True, 1)
    assert not budget_applies(False, MIN_TESTS - 1)  # one file: its first test pays the imports


def test_a_budget_of_zero_turns_the_check_off(pytester, monkeypatch):
    result, spent = run_suite(pytester, monkeypatch, "0", fail_at="1")
    result.assert_outcomes(passed=5)
    assert "over the CPU budget" not in result.stdout.str()
    assert spent["test_costly"] >= 0.09 and spent["test_cheap"] < 0.04
