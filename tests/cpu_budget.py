"""A CPU budget for fast tests: it reports, ranks and (only in ``make test-fast``, and only far past
the budget) fails the fast tests that cost too much, naming each one and what it used.

The fast suite is the loop every change waits on, so a test that loads the bundled model, builds
a real index or trains for more than a step belongs under ``slow`` (the full run still runs it).
The budget is CPU seconds, not wall seconds, so a busy machine does not move it: the process's own
CPU time (all its threads) plus that of child processes it waited for (a CLI run in a
subprocess). What a test's setup spends on fixtures shared by many tests (session, package or
module scope: one real embedder, one demo index) is not charged to the test that happens to come
first; its function-scoped fixtures are.

CPU seconds still grow on a slower processor (machines of one kind differ 2.5x), so the budget
never decides whether the suite is green by itself:

- every fast test over the budget is listed, costliest first, at the end of the run (a warning);
- a fast test fails only when ``DYNRAG_TEST_CPU_FAIL_AT`` is set (``make test-fast`` sets 3) and
  it used that many times the budget, far enough past it that a slower machine does not get there
  while a test that really belongs under ``slow`` still does. ``make test`` never sets it.

The check runs when a session selects at least ``MIN_TESTS`` tests (a suite run such as ``make
test-fast``): in a run of one file, the first test also pays for importing torch and
transformers, a cost the whole suite shares. ``DYNRAG_TEST_CPU_BUDGET`` sets the budget in
seconds and applies it to any run (default 5; 0 turns the check off);
``DYNRAG_TEST_CPU_REPORT=FILE`` writes every test's CPU seconds there (JSON lines, the costliest
first), to find what to make cheaper. Every run ends with the CPU seconds it used in all, so runs
on two machines can be compared by work rather than by the clock.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

DEFAULT_BUDGET_S = 5.0
MIN_TESTS = 100
_SHARED_SCOPES = ("session", "package", "module", "class")
_SPENT = pytest.StashKey[float]()


class _Tally:
    """One session's figures, kept on its config (a suite run by pytester has its own)."""

    def __init__(self) -> None:
        # CPU spent on shared fixtures during the setup now running (a fixture's request names
        # the node of its own scope, not the test being set up, so the setup hook keeps this).
        self.shared_in_setup = 0.0
        self.shared_depth = 0  # a shared fixture set up inside another is in the outer one's time
        self.spent_by_test: dict[str, float] = {}
        self.budget_s = budget_s()  # read once: a test that sets the variable changes only its own runs
        self.budget_given = bool(os.environ.get("DYNRAG_TEST_CPU_BUDGET", "").strip())
        self.fail_at = fail_factor()
        self.selected = 0
        self.report = os.environ.get("DYNRAG_TEST_CPU_REPORT")
        self.over: dict[str, float] = {}  # fast tests past the budget, failed or not


_TALLY = pytest.StashKey[_Tally]()


def _tally(config) -> _Tally:
    if _TALLY not in config.stash:
        config.stash[_TALLY] = _Tally()
    return config.stash[_TALLY]


def cpu_seconds() -> float:
    """CPU time of this process (every thread) and of its finished children."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def budget_s() -> float:
    value = os.environ.get("DYNRAG_TEST_CPU_BUDGET", "")
    try:
        return float(value) if value.strip() else DEFAULT_BUDGET_S
    except ValueError:
        raise pytest.UsageError(f"DYNRAG_TEST_CPU_BUDGET={value!r}: expected a number of CPU seconds") from None


def fail_factor() -> float | None:
    """How many times the budget a fast test may use before it fails (None: it never fails)."""
    value = os.environ.get("DYNRAG_TEST_CPU_FAIL_AT", "")
    if not value.strip():
        return None
    try:
        factor = float(value)
    except ValueError:
        factor = 0.0
    if factor < 1:
        raise pytest.UsageError(f"DYNRAG_TEST_CPU_FAIL_AT={value!r}: expected a multiple of the budget, 1 or more")
    return factor


def budget_applies(given: bool, selected: int) -> bool:
    """Whether the budget is checked: when it was given, or for a suite-sized run."""
    return given or selected >= MIN_TESTS


def over_budget_message(nodeid: str, spent: float, budget: float, factor: float) -> str:
    return (
        f"{nodeid} used {spent:.1f} s of CPU, {factor:g} times the fast-test budget of {budget:g} s or more: "
        "make it cheaper (a double from tests/fakes.py, the tiny random model, a shared fixture) "
        "or mark it @pytest.mark.slow"
    )


def fails(spent: float, budget: float, factor: float | None) -> bool:
    """A fast test's verdict from its CPU: only with a factor given, and only past factor x budget."""
    return factor is not None and budget > 0 and spent > budget * factor


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    tally = _tally(request.config)
    shared = fixturedef.scope in _SHARED_SCOPES
    start = cpu_seconds()
    tally.shared_depth += shared
    try:
        yield
    finally:
        tally.shared_depth -= shared
    if shared and tally.shared_depth == 0:
        tally.shared_in_setup += cpu_seconds() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    tally = _tally(item.config)
    tally.shared_in_setup = 0.0
    start = cpu_seconds()
    yield
    item.stash[_SPENT] = item.stash.get(_SPENT, 0.0) + cpu_seconds() - start - tally.shared_in_setup


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = cpu_seconds()
    yield
    item.stash[_SPENT] = item.stash.get(_SPENT, 0.0) + cpu_seconds() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when != "call" or not report.passed:
        return
    spent = item.stash.get(_SPENT, 0.0)
    _tally(item.config).spent_by_test[item.nodeid] = spent
    if item.get_closest_marker("slow"):
        return
    tally = _tally(item.config)
    budget = tally.budget_s
    if not budget_applies(tally.budget_given, tally.selected) or budget <= 0 or spent <= budget:
        return
    tally.over[item.nodeid] = spent
    if fails(spent, budget, tally.fail_at):
        report.outcome = "failed"
        report.longrepr = over_budget_message(item.nodeid, spent, budget, tally.fail_at)


def pytest_configure(config):
    _tally(config)


def pytest_collection_finish(session):
    _tally(session.config).selected = len(session.items)


def pytest_terminal_summary(terminalreporter, config):
    tally = _tally(config)
    if tally.over:
        fail_at = f"; a fast test fails at {tally.fail_at:g}x" if tally.fail_at else "; no test fails for it here"
        terminalreporter.write_sep("-", f"fast tests over the CPU budget of {tally.budget_s:g} s{fail_at}")
        for nodeid, spent in sorted(tally.over.items(), key=lambda pair: -pair[1]):
            terminalreporter.write_line(f"{spent:7.1f} s  {nodeid}")
    own = time.process_time()
    terminalreporter.write_line(
        f"CPU: {cpu_seconds():.1f} s in all, {len(tally.spent_by_test)} tests passed (this process {own:.1f} s "
        f"with imports and collection, the child processes it waited for {cpu_seconds() - own:.1f} s)"
    )


def pytest_sessionfinish(session):
    path = _tally(session.config).report
    if path:
        ranked = sorted(_tally(session.config).spent_by_test.items(), key=lambda pair: -pair[1])
        with open(path, "w", encoding="utf-8") as f:
            for nodeid, spent in ranked:
                f.write(json.dumps({"test": nodeid, "cpu_s": round(spent, 3)}) + "\n")
