"""The model queue and the cancellable model wrapper, without a model: admission, 429 capacity,
cancelling a waiting job, a deadline, and a cancel stopping decoding at the next token."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from dynrag.serve.cancel import CancellableLM, Cancelled
from dynrag.serve.queue import Disconnected, ModelQueue, QueueFull, TimedOut
from tests.fakes import SteppingLM


def test_a_cancel_stops_decoding_at_the_next_token():
    inner = SteppingLM()
    lm = CancellableLM(inner)
    lm.event = threading.Event()
    assert lm.generate("p", 5) == "done" and inner.tokens == 5
    assert lm.generate("p", 50, stop_when=lambda s: s.tokens >= 7) == "stopped"  # the method's own callback kept
    threading.Timer(0.02, lm.event.set).start()
    with pytest.raises(Cancelled):
        lm.generate("p", 100_000)
    assert inner.tokens < 100_000
    with pytest.raises(Cancelled):  # and any later call into the model
        lm.helper(2)
    lm.event = None
    assert lm.helper(2) == 4 and lm.name == "stepping"


def test_capacity_429_and_a_cancelled_waiting_job_never_runs():
    queue = ModelQueue(CancellableLM(SteppingLM()), queue_size=1)
    release = threading.Event()
    ran = []
    first = queue.submit(lambda: (release.wait(5), ran.append("first")))
    second = queue.submit(lambda: ran.append("second"))
    with pytest.raises(QueueFull) as full:
        queue.submit(lambda: ran.append("third"))
    assert full.value.retry_after >= 1 and full.value.capacity == 2
    time.sleep(0.05)
    assert queue.status()["running"] == 1 and queue.status()["waiting"] == 1 and queue.status()["rejected"] == 1
    second.cancel.set()
    release.set()
    first.future.result(5)
    with pytest.raises(Cancelled):
        second.future.result(5)
    assert ran == ["first"]
    status = queue.status()
    assert status["completed"] == 1 and status["cancelled"] == 1 and status["running"] == status["waiting"] == 0
    queue.submit(lambda: ran.append("fourth")).future.result(5)  # room again
    assert ran[-1] == "fourth"


def test_wait_for_cancels_on_the_deadline_and_on_disconnect():
    lm = CancellableLM(SteppingLM())
    queue = ModelQueue(lm, queue_size=2)

    async def scenario():
        job = queue.submit(lambda: lm.generate("p", 1_000_000))
        with pytest.raises(TimedOut):
            await queue.wait_for(job, time.monotonic() + 0.2)
        assert job.cancel.is_set()
        with pytest.raises(Cancelled):
            await asyncio.wrap_future(job.future)
        job = queue.submit(lambda: lm.generate("p", 1_000_000))
        calls = []

        async def gone():
            calls.append(1)
            return len(calls) > 2

        with pytest.raises(Disconnected):
            await queue.wait_for(job, time.monotonic() + 60, gone)
        with pytest.raises(Cancelled):
            await asyncio.wrap_future(job.future)

    asyncio.run(scenario())
    status = queue.status()
    assert status["timed_out"] == 1 and status["disconnected"] == 1 and status["cancelled"] == 2
