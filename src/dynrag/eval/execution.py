"""How `dynrag eval` answers its questions: in this process, on threads, on local worker processes
or on a Dask cluster, behind one interface.

An ``Executor`` takes (id, question) pairs and yields an ``Outcome`` (the id, the method's
``Answer.to_dict()`` and the seconds it took) for each question as it finishes, in any order.
The runner's coordinating loop is the only reader of those outcomes and the only writer of
predictions.jsonl: executors never touch the run directory, so every question is written once,
by one process, whichever executor answered it.

- ``InProcess``: one question at a time with one method (the default on one core, and the only
  choice for a caller-made method object).
- ``Threads(n)``: n questions in flight sharing one method; for a model behind an HTTP server,
  where a question spends its time waiting on the network (an in-process torch model is not
  thread-safe).
- ``Batched(n)``: n questions in flight on threads sharing one method over one local model whose
  generations one batching engine decodes together (lm/batch_engine.py): one forward pass a token
  for every question in flight, one copy of the model.
- ``Processes(n)`` (processes.py): n local worker processes, each with its own model; a worker
  killed mid-question is replaced and its question asked again.
- ``DaskCluster(address)`` (dask_cluster.py): tasks on any Dask cluster; its scheduler reruns the
  questions of a lost worker.

Workers rebuild the method from a ``WorkerJob`` (the resolved run config, the index directory and
a picklable method factory), the same way the coordinator builds it in-process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from dynrag.eval.worker import Outcome, Question, WorkerJob, timed_answer, usable_cores
from dynrag.methods.base import Method
from dynrag.run.checks import check_execution


class Executor(Protocol):
    description: str  # for the progress line, e.g. "2 worker processes"

    def answers(self, questions: Sequence[Question]) -> Iterator[Outcome]: ...


@dataclass
class InProcess:
    """Questions one after another, with the method built here (once, on first use)."""

    job: WorkerJob
    progress: bool = False
    description: str = "1 process"
    method: Method | None = field(default=None, init=False)

    def answers(self, questions: Sequence[Question]) -> Iterator[Outcome]:
        if self.method is None:
            self.method = self.job.build(self.progress)
        for qid, question in questions:
            yield timed_answer(self.method, qid, question)


@dataclass
class Threads:
    """Up to ``n`` questions in flight at once on threads sharing one method, yielded as they
    finish; at most ``n`` answers are lost to a crash (and asked again on resume)."""

    job: WorkerJob
    n: int
    progress: bool = False
    method: Method | None = field(default=None, init=False)

    @property
    def description(self) -> str:
        return f"{self.n} threads"

    def build(self) -> Method:
        return self.job.build(self.progress)

    def answers(self, questions: Sequence[Question]) -> Iterator[Outcome]:
        if self.method is None:
            self.method = self.build()
        method = self.method
        yield from in_flight(lambda q: timed_answer(method, *q), questions, self.n, name="dynrag-eval")


def in_flight(fn: Callable[[Any], Any], items: Iterable[Any], n: int, name: str = "dynrag") -> Iterator[Any]:
    """``fn(item)`` for every item, at most ``n`` at once on threads, yielded as each finishes (in
    order, one at a time, with ``n`` = 1); what is still queued is cancelled if the caller stops."""
    if n <= 1:
        yield from map(fn, items)
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    queue = iter(items)
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix=name) as pool:
        pending = {pool.submit(fn, item) for _, item in zip(range(n), queue)}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
                    item = next(queue, None)
                    if item is not None:
                        pending.add(pool.submit(fn, item))
        finally:
            for future in pending:
                future.cancel()


@dataclass
class Batched(Threads):
    """Up to ``n`` questions in flight on threads, over one local model behind a batching engine."""

    @property
    def description(self) -> str:
        return f"{self.n} questions in flight, generations batched"

    def build(self) -> Method:
        from dataclasses import replace

        return replace(self.job, batch=self.n).build(self.progress)


# ---- choosing an executor -----------------------------------------------------------------------


def auto_workers(model: str, todo: int) -> int:
    """``--workers auto``: one worker process per core for a model that runs in-process on the CPU
    (one torch thread each), else 1. Measured on two cores (benchmarks/LOG.md, "eval
    throughput on two cores"): two single-threaded worker processes answer more questions a minute
    than one process whose torch uses both cores."""
    from dynrag.lm.spec import ModelSpec

    if not ModelSpec.parse(model).is_local:  # a server: its questions wait on the network, not a core
        return 1
    return max(1, min(usable_cores(), todo))


def picklable(job: WorkerJob) -> bool:
    import pickle

    try:
        pickle.dumps(job)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


def make_executor(
    job: WorkerJob, *, workers: int | str = 1, dask: str | None = None, concurrency: int = 1, todo: int = 1,
    progress: bool = False, batch: int = 1,
) -> Executor:
    """The executor for ``--workers N|auto``, ``--dask ADDRESS``, ``--concurrency N`` (threads
    sharing one model behind an HTTP server) and ``--batch N`` (threads sharing one local model,
    generations batched); they are exclusive."""
    from dynrag.errors import ConfigError

    check_execution(workers=workers, dask=dask, concurrency=concurrency, batch=batch)
    if batch > 1 and workers in (1, "auto"):
        return Batched(job, min(batch, max(todo, 1)), progress)
    if concurrency > 1:
        return Threads(job, min(concurrency, max(todo, 1)), progress)
    if dask:
        from dynrag.eval.dask_cluster import DaskCluster

        return DaskCluster(job, dask)
    if workers == "auto":
        # A caller's method factory that cannot be sent to another process (a closure) runs here.
        n = auto_workers(job.config["model"], todo) if picklable(job) else 1
    else:
        n = min(workers, max(todo, 1))
        if n > 1 and not picklable(job):
            raise ConfigError(f"--workers {workers}: the method factory cannot be sent to worker processes "
                              "(make it a module-level function or class)")
    if n == 1:
        return InProcess(job, progress)
    from dynrag.eval.processes import Processes

    threads = job.torch_threads or max(1, usable_cores() // n)  # the cores shared out, one model each
    return Processes(WorkerJob(job.config, job.index_dir, job.work_dir, job.factory, threads, batch), n)
