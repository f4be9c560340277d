"""The worker side of `dynrag eval`: what a process needs to answer a run's questions.

A ``WorkerJob`` (the resolved run config, the index directory and a picklable method factory)
builds the run's method anywhere: in the coordinating process, in a local worker process
(processes.py) or in a Dask worker (dask_cluster.py); a worker keeps the one method it built and
answers with it (``answer_in_worker``), returning an ``Outcome``. The coordinator's side, which
executor answers and how, is execution.py.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.methods.base import Method
from dynrag.retrieval.base import Retriever

# (resolved config, retriever or None) -> a ready Method. Workers need it picklable (a module-level
# function or an instance of a module-level class).
MethodFactory = Callable[[dict[str, Any], Retriever | None], Method]
Question = tuple[str, str]  # (id, question text)


@dataclass(frozen=True)
class Outcome:
    id: str
    answer: dict[str, Any]  # Answer.to_dict()
    seconds: float


@dataclass(frozen=True)
class WorkerJob:
    """Everything needed to build the run's method anywhere: plain data plus the factory."""

    config: dict[str, Any]
    index_dir: str | None  # the index to search (None: no retrieval, or a search server)
    work_dir: str  # the run directory (dense parts and milvus files are looked up beside it)
    factory: MethodFactory
    torch_threads: int | None = None  # per worker process; None leaves torch's default
    # Questions in flight in each process over one batching model (lm/batch_engine.py); 1: one at a
    # time. Only for the run's own method (the default factory): it is rebuilt over the batching model.
    batch: int = 1

    @property
    def key(self) -> str:
        """Identifies the method this job builds (a worker process caches one per key)."""
        f = self.factory
        factory = [getattr(f, "__module__", ""), getattr(f, "__qualname__", None) or repr(f)]
        if not hasattr(f, "__qualname__"):  # a factory object: its fields decide what it builds
            factory.append(repr(f))
        text = json.dumps([self.config, self.index_dir, self.work_dir, factory, self.batch], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def build(self, progress: bool = False) -> Method:
        if self.torch_threads:
            set_torch_threads(self.torch_threads)
        from dynrag.eval.steps import open_run_retriever

        retriever = open_run_retriever(self.config, self.index_dir, Path(self.work_dir), progress)
        if self.batch > 1:
            from dynrag.run.assemble import method_from_saved

            return method_from_saved(self.config, retriever, batch=self.batch, progress=progress)
        return self.factory(self.config, retriever)


def set_torch_threads(n: int) -> None:
    """torch's intra-op threads for this process: through the environment when torch is not
    imported yet (a fresh worker: importing torch only for this would cost seconds), else directly."""
    import os
    import sys

    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)


def usable_cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def timed_answer(method: Method, qid: str, question: str) -> Outcome:
    started = time.perf_counter()
    answer = method.answer(question)
    return Outcome(qid, answer.to_dict(), time.perf_counter() - started)


_WORKER_METHODS: dict[str, tuple[Method, threading.Lock]] = {}
_WORKER_BUILD = threading.Lock()


def worker_method(job: WorkerJob) -> tuple[Method, threading.Lock]:
    key = job.key
    with _WORKER_BUILD:
        if key not in _WORKER_METHODS:
            _WORKER_METHODS.clear()  # a worker holds one run's model at a time
            _WORKER_METHODS[key] = (job.build(), threading.Lock())
        return _WORKER_METHODS[key]


def answer_in_worker(job: WorkerJob, qid: str, question: str) -> Outcome:
    """Answer one question in a worker process, building (and keeping) the job's method first."""
    method, lock = worker_method(job)
    with lock:
        return timed_answer(method, qid, question)
