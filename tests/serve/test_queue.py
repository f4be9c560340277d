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
from tests.waiting import HANG_GUARD_S, wait_for


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
    first = queue.submit(lambda: (release.wait(HANG_GUARD_S), ran.append("first")))
    second = queue.submit(lambda: ran.append("second"))
    with pytest.raises(QueueFull) as full:
        queue.submit(lambda: ran.append("third"))
    assert full.value.retry_after >= 1 and full.value.capacity == 2
    wait_for(lambda: queue.status()["running"] == 1, "the first job to start", last=queue.status)
    assert queue.status()["running"] == 1 and queue.status()["waiting"] == 1 and queue.status()["rejected"] == 1
    second.cancel.set()
    release.set()
    first.future.result(HANG_GUARD_S)
    with pytest.raises(Cancelled):
        second.future.result(HANG_GUARD_S)
    assert ran == ["first"]
    status = queue.status()
    assert status["completed"] == 1 and status["cancelled"] == 1 and status["running"] == status["waiting"] == 0
    queue.submit(lambda: ran.append("fourth")).future.result(HANG_GUARD_S)  # room again
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


def test_n_workers_run_n_jobs_at_once_and_429_beyond_n_plus_the_queue():
    queue = ModelQueue(CancellableLM(SteppingLM()), queue_size=1, workers=3)
    release = threading.Event()
    started = []
    jobs = [queue.submit(lambda i=i: (started.append(i), release.wait(HANG_GUARD_S))) for i in range(4)]
    with pytest.raises(QueueFull) as full:
        queue.submit(lambda: None)
    assert full.value.capacity == 4
    wait_for(lambda: len(started) >= 3, "three jobs to start")
    status = queue.status()
    assert status["running"] == 3 and status["waiting"] == 1 and status["batch"] == 3 and status["capacity"] == 4
    assert sorted(started) == [0, 1, 2]  # the fourth waits for a worker
    release.set()
    for job in jobs:
        job.future.result(HANG_GUARD_S)
    status = queue.status()
    assert status["completed"] == 4 and status["running"] == status["waiting"] == 0 and status["rejected"] == 1


def test_retry_after_shares_the_wait_over_the_workers():
    one, four = (ModelQueue(CancellableLM(SteppingLM()), queue_size=0, workers=n) for n in (1, 4))
    for queue in (one, four):
        queue._service.extend([8.0] * 4)
        queue._admitted = queue.capacity
    assert one._retry_after() == 8 and four._retry_after() == 8  # 1 x 8 s vs 4 jobs / 4 workers x 8 s
    four._admitted = 2
    assert four._retry_after() == 4


def test_each_thread_has_its_own_cancel_event():
    lm = CancellableLM(SteppingLM())
    lm.event = threading.Event()
    lm.event.set()
    seen = []
    other = threading.Thread(target=lambda: seen.append((lm.event, lm.generate("p", 3))))
    other.start()
    other.join(HANG_GUARD_S)
    assert seen == [(None, "done")]  # the other thread's calls are not cancelled by this thread's event
    with pytest.raises(Cancelled):
        lm.generate("p", 3)


def test_batched_jobs_cancel_alone_and_the_others_decode_as_alone():
    """Three jobs over one batching engine (whose callbacks run on the engine's thread): the one that
    is cancelled stops at its next token; the other two give what they give alone."""
    from dynrag.lm.batching import BatchingLM
    from tests.tiny_models import tiny_llama_lm

    prompts = [f"question {i} : who built the bridge of town {i} ? answer :" for i in range(3)]
    alone = tiny_llama_lm(seed=3)
    expected = [alone.generate(p, 40).token_ids for p in prompts]
    batching = BatchingLM(tiny_llama_lm(seed=3), max_rows=4)
    lm = CancellableLM(batching)
    queue = ModelQueue(lm, queue_size=0, workers=3)
    at_cancel = []

    def cancel_self_after_five(state):
        if len(state.token_ids) == 5:
            at_cancel.append(5)
            own_event.set()
        elif at_cancel:
            at_cancel.append(len(state.token_ids))  # must never be seen: the next token raises
        return False

    own_event = threading.Event()

    def job(i):
        if i == 1:
            lm.event = own_event  # this worker's job: it cancels itself mid-generation
            return lm.generate(prompts[i], 40, stop_when=cancel_self_after_five)
        return lm.generate(prompts[i], 40).token_ids

    try:
        jobs = [queue.submit(lambda i=i: job(i)) for i in range(3)]
        assert jobs[0].future.result(60) == expected[0]
        assert jobs[2].future.result(60) == expected[2]
        with pytest.raises(Cancelled):
            jobs[1].future.result(60)
    finally:
        batching.close()
    assert at_cancel == [5]
    status = queue.status()
    assert status["completed"] == 2 and status["cancelled"] == 1
