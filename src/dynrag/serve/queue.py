"""Up to ``workers`` requests run at once; a bounded queue holds the next ones; beyond it, 429.

`ModelQueue.submit` admits a job or raises `QueueFull` (with a Retry-After estimate from recent
service times, shared out over the workers). Jobs run on ``workers`` threads: one for a model
that answers one request at a time, N when the server batches (the generations of the N
running requests then decode together; serve/cli.py wraps the model for that). `wait_for` is the async side: it returns the job's
result, or cancels the job (which then stops at its next token) when the request's deadline passes
or its client hangs up. Counters feed `/health`.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from dynrag.serve.cancel import CancellableLM, Cancelled


class QueueFull(Exception):
    def __init__(self, retry_after: int, capacity: int):
        super().__init__(f"the model is busy: {capacity} requests are running or waiting")
        self.retry_after = retry_after
        self.capacity = capacity


class TimedOut(Exception):
    pass


class Disconnected(Exception):
    pass


@dataclass(eq=False)  # identity, so jobs can live in a set
class Job:
    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future | None = None
    admitted: float = field(default_factory=time.monotonic)


def watch(job: Job) -> asyncio.Future:
    """An asyncio view of the job's future whose exception counts as seen (a cancelled job's
    exception arrives after its request has already been answered)."""
    future = asyncio.wrap_future(job.future)
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return future


class ModelQueue:
    def __init__(self, lm: CancellableLM, queue_size: int, workers: int = 1):
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.lm, self.workers = lm, workers
        self.capacity = workers + queue_size  # those running plus those waiting
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dynrag-model")
        self._lock = threading.Lock()
        self._admitted = 0
        self._running = 0
        self._service = deque(maxlen=32)  # seconds of recent jobs, for Retry-After
        self.counts: Counter[str] = Counter()
        self._jobs: set[Job] = set()

    def submit(self, fn: Callable[[], Any]) -> Job:
        with self._lock:
            if self._admitted >= self.capacity:
                self.counts["rejected"] += 1  # under the lock: many threads count
                raise QueueFull(self._retry_after(), self.capacity)
            self._admitted += 1
        job = Job()
        with self._lock:
            self._jobs.add(job)
        job.future = self._executor.submit(self._run, job, fn)
        # A cancelled job's exception is expected; retrieve it so asyncio does not warn.
        job.future.add_done_callback(lambda f: f.exception())
        return job

    def _run(self, job: Job, fn: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        running = False
        try:
            if job.cancel.is_set():
                raise Cancelled()  # cancelled while it waited: never start it
            with self._lock:
                self._running += 1
            running = True
            self.lm.event = job.cancel  # this worker thread's; the others keep theirs
            result = fn()
            with self._lock:  # read under it by _retry_after: no deque mutated while summed
                self._service.append(time.perf_counter() - started)
                self.counts["completed"] += 1
            return result
        except Cancelled:
            self.count("cancelled")
            raise
        except Exception:
            self.count("failed")
            raise
        finally:
            self.lm.event = None
            with self._lock:
                self._running -= int(running)
                self._admitted -= 1
                self._jobs.discard(job)

    def count(self, key: str) -> None:
        with self._lock:
            self.counts[key] += 1

    def _retry_after(self) -> int:
        """Seconds until a slot frees, roughly: the admitted jobs drain ``workers`` at a time, each
        taking the recent mean (measured while they shared the model, so batching is in it)."""
        mean = sum(self._service) / len(self._service) if self._service else 5.0
        return max(1, min(600, math.ceil(mean * self._admitted / self.workers)))

    async def wait_for(self, job: Job, deadline: float,
                       disconnected: Callable[[], Awaitable[bool]] | None = None) -> Any:
        """The job's result; cancels the job and raises TimedOut / Disconnected otherwise."""
        future = watch(job)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                job.cancel.set()
                self.count("timed_out")
                raise TimedOut()
            done, _ = await asyncio.wait({future}, timeout=min(0.25, remaining))
            if done:
                return future.result()
            if disconnected is not None and await disconnected():
                job.cancel.set()
                self.count("disconnected")
                raise Disconnected()

    def cancel_all(self) -> None:
        with self._lock:
            jobs = list(self._jobs)
        for job in jobs:
            job.cancel.set()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def status(self) -> dict[str, Any]:
        with self._lock:
            running, admitted, counts = self._running, self._admitted, dict(self.counts)
        return {
            "running": running,
            "waiting": max(0, admitted - running),
            "batch": self.workers,
            "capacity": self.capacity,
            **{k: counts.get(k, 0) for k in ("completed", "failed", "cancelled", "timed_out", "disconnected", "rejected")},
        }
