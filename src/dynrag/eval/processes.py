"""``Processes``: answer questions on N local worker processes, each with its own model.

Each worker is a fresh (spawned) Python process that builds the run's method once from the
``WorkerJob`` and then answers one question at a time, handed to it over its own pipe; it sends the
outcome back and gets the next question, so a slow question never holds up the others and at most
N questions are in flight. Workers never write to the run directory.

A worker that dies (kill -9, the OOM killer) is noticed through its process sentinel: its question
goes back to the front of the queue and a new worker takes its place. A question that has killed
``max_attempts`` workers stops the run with an error naming it, rather than killing workers forever.
An exception raised by the method in a worker is raised again here, as it would be in one process.
"""

from __future__ import annotations

import os
import pickle
import traceback
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from dynrag.errors import DynragError
from dynrag.eval.worker import Outcome, Question, WorkerJob, timed_answer

_STOP_GRACE_S = 5.0


class WorkerError(DynragError):
    """A worker process could not start or kept dying."""


@dataclass
class _Worker:
    process: Any
    conn: Connection
    ready: bool = False
    # Questions handed to it and not answered yet: one, or up to the job's batch.
    current: list[Question] = field(default_factory=list)


@dataclass
class Processes:
    job: WorkerJob
    n: int
    max_attempts: int = 3
    description: str = field(init=False)

    def __post_init__(self) -> None:
        self.description = f"{self.n} worker processes" + (
            f", {self.job.batch} questions in flight in each, generations batched" if self.job.batch > 1 else "")

    def answers(self, questions: Sequence[Question]) -> Iterator[Outcome]:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold torch threads
        queue: deque[Question] = deque(questions)
        deaths: dict[str, int] = {}
        failed_starts = 0
        workers: list[_Worker] = []

        def start() -> None:
            parent, child = ctx.Pipe()
            process = ctx.Process(target=_worker_main, args=(self.job, child), name="dynrag-eval-worker", daemon=True)
            process.start()
            child.close()
            workers.append(_Worker(process, parent))

        try:
            for _ in range(min(self.n, len(queue))):
                start()
            while queue or any(w.current for w in workers):
                for w in workers:
                    while w.ready and len(w.current) < self.job.batch and queue:
                        w.current.append(queue.popleft())
                        w.conn.send(w.current[-1])
                wait([w.conn for w in workers] + [w.process.sentinel for w in workers])
                for w in list(workers):
                    closed = False
                    while w.conn.poll():  # drain first: a worker may answer and die right after
                        try:
                            message = w.conn.recv()
                        except (EOFError, OSError):
                            closed = True
                            break
                        outcome = self._handle(w, message)
                        if outcome is not None:
                            yield outcome
                    if closed:
                        w.process.join(_STOP_GRACE_S)
                    if w.process.is_alive():
                        continue
                    self._buried(w, workers, queue, deaths)
                    if not w.ready and not w.current:
                        failed_starts += 1
                        if failed_starts >= self.max_attempts:
                            raise WorkerError(
                                f"worker processes keep dying while starting (exit code {w.process.exitcode})"
                            )
                    if queue or any(x.current for x in workers):
                        start()
        finally:
            _stop(workers)

    def _buried(self, w: _Worker, workers: list[_Worker], queue: deque[Question], deaths: dict[str, int]) -> None:
        """A worker died: take it out, and put its questions back at the front of the queue."""
        w.process.join()
        workers.remove(w)
        w.conn.close()
        for question in reversed(w.current):
            qid = question[0]
            deaths[qid] = deaths.get(qid, 0) + 1
            if deaths[qid] >= self.max_attempts:
                raise WorkerError(
                    f"question {qid!r} killed {deaths[qid]} worker processes (last exit code {w.process.exitcode}); "
                    "stopping (finished answers are saved: fix the cause and run the command again)"
                )
            queue.appendleft(question)
        w.current = []

    def _handle(self, w: _Worker, message: tuple) -> Outcome | None:
        kind = message[0]
        if kind == "ready":
            w.ready = True
            return None
        if kind == "done":
            w.current = [q for q in w.current if q[0] != message[1].id]
            return message[1]
        if kind == "error":  # the method raised (or the worker could not build it): raise it here
            w.current = []
            raise _unpickle_error(message[1], message[2])
        raise WorkerError(f"unexpected message from a worker process: {kind!r}")


def _stop(workers: list[_Worker]) -> None:
    for w in workers:
        try:
            w.conn.send(None)
        except (OSError, ValueError):
            pass
    for w in workers:
        w.process.join(_STOP_GRACE_S)
        if w.process.is_alive():
            w.process.kill()
            w.process.join()
        w.conn.close()


def _worker_main(job: WorkerJob, conn: Connection) -> None:
    """The worker process: build the method, then answer questions until told to stop."""
    try:
        try:
            method = job.build()
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the coordinator
            conn.send(("error", _pickled(exc), traceback.format_exc()))
            return
        conn.send(("ready", os.getpid()))
        if job.batch > 1:
            _answer_in_flight(method, conn, job.batch)
            return
        while True:
            task = conn.recv()
            if task is None:
                return
            qid, question = task
            try:
                outcome = timed_answer(method, qid, question)
            except Exception as exc:  # noqa: BLE001
                conn.send(("error", _pickled(exc), traceback.format_exc()))
                return
            conn.send(("done", outcome))
    except (EOFError, OSError, KeyboardInterrupt):
        return  # the coordinator went away or Ctrl-C: nothing to report to


def _answer_in_flight(method: Any, conn: Connection, n: int) -> None:
    """Answer up to ``n`` questions at once on threads (their generations batched by the method's
    model), each outcome sent as it finishes; the coordinator never hands over more than ``n``."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    sending = threading.Lock()
    failed = threading.Event()

    def answer(qid: str, question: str) -> None:
        try:
            outcome = timed_answer(method, qid, question)
        except Exception as exc:  # noqa: BLE001
            with sending:
                conn.send(("error", _pickled(exc), traceback.format_exc()))
            failed.set()
            return
        with sending:
            conn.send(("done", outcome))

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="dynrag-worker") as pool:
        while not failed.is_set():
            task = conn.recv()
            if task is None:
                return
            pool.submit(answer, *task)


def _pickled(exc: BaseException) -> bytes | None:
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return data
    except Exception:  # noqa: BLE001 - an exception that does not survive pickling
        return None


def _unpickle_error(data: bytes | None, trace: str) -> BaseException:
    if data is not None:
        exc = pickle.loads(data)
        if isinstance(exc, BaseException):
            return exc
    last = trace.strip().splitlines()[-1] if trace.strip() else "unknown error"
    return WorkerError(f"a worker process failed: {last}")
