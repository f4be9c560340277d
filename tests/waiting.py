"""Waiting for a state, never for a speed.

Machines of one kind differ 2.5x in speed, and a loaded one more, so no test's verdict may hang on
how fast real work runs. A test that needs something to have happened (a server up, a record
written, a request running) polls for that state with ``wait_for``; its limit is a hang guard, so
a run that is truly stuck ends with the state it waited for named, instead of hanging CI. It is
far longer than any wait of a passing run on a slow machine, and no test sets a shorter one.
Subprocess runs and HTTP calls that do model work take ``HANG_GUARD_S`` as their timeout for the
same reason. ``DYNRAG_TEST_HANG_GUARD`` (seconds) changes it for one run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable, TypeVar

T = TypeVar("T")

HANG_GUARD_S = float(os.environ.get("DYNRAG_TEST_HANG_GUARD") or 1800)


def wait_for(predicate: Callable[[], T], what: str, poll_s: float = 0.02, last: Callable[[], object] | None = None) -> T:
    """``predicate()``'s first truthy value, polled every ``poll_s``; after ``HANG_GUARD_S`` an
    AssertionError naming ``what`` never happened (and ``last()``, the state it stayed in)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = f"; last seen: {last()}" if last is not None else ""
            raise AssertionError(f"stuck: waited {HANG_GUARD_S:g} s (a hang guard, not a speed limit) for {what}{seen}")
        time.sleep(poll_s)


def kill_when(proc: subprocess.Popen, ready: Callable[[], bool], what: str) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds (polled, so the kill lands on a state, not on
    a moment). Fails if the process ends on its own first: the test must interrupt real work."""
    def state() -> bool:
        return proc.poll() is not None or ready()

    try:
        wait_for(state, what)
        if proc.poll() is not None:
            output = proc.stderr.read()[-2000:] if proc.stderr else ""
            raise AssertionError(f"it ended (rc {proc.returncode}) before {what}: {output}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(HANG_GUARD_S)
