"""Stand-ins shared by the tests: fast, deterministic, with the interfaces of the real parts."""

from __future__ import annotations

import hashlib
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dynrag.methods.base import Answer, Retrieval, Step, Trace
from dynrag.retrieval.base import BatchSearch, Hit


class HashEmbedder:
    """Bag-of-words hashed into ``dim`` buckets, L2-normalised: fast, deterministic, and texts that
    share words are similar. Same interface as dynrag.retrieval.embedder.Embedder."""

    def __init__(self, dim: int = 16, name: str = "hash-embedder"):
        self.dimension = dim
        self.name = name
        self.calls = 0

    def encode(self, texts, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                h = int(hashlib.md5(w.strip(".,?!\"'").encode()).hexdigest(), 16)
                out[i, h % self.dimension] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


class FakeRetriever(BatchSearch):
    """Fixed hits: ``hits`` for every query, or per query text the ids in ``rankings`` (title and
    text empty, score 1.0). Records every query and every k it was asked for."""

    def __init__(self, hits: list[Hit] | None = None, rankings: dict[str, list[str]] | None = None):
        self.hits = list(hits or [])
        self.rankings = rankings
        self.queries: list[str] = []
        self.asked: list[int] = []

    def search_batch(self, queries, k):
        self.queries.extend(queries)
        self.asked.append(k)
        if self.rankings is None:
            return [self.hits[:k] for _ in queries]
        return [[Hit(pid, "", "", 1.0) for pid in self.rankings.get(q, [])[:k]] for q in queries]


class FakeMethod:
    """Retrieves once with the question (when it has a retriever) and answers from a lookup table.

    ``answers`` maps question -> final answer; questions not in it get "unknown".
    ``sleep`` seconds per question let a test kill a run mid-way.
    """

    name: ClassVar[str] = "fake"

    def __init__(self, retriever=None, answers: dict[str, str] | None = None, sleep: float = 0.0, k: int = 3,
                 log: str | None = None):
        self.retriever, self.answers, self.sleep, self.k, self.log = retriever, answers or {}, sleep, k, log
        self.calls: list[str] = []

    def answer(self, question: str) -> Answer:
        self.calls.append(question)
        if self.log:  # one short O_APPEND write per line: lines from several processes never mix
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\t{question}\n")
        if self.sleep:
            time.sleep(self.sleep)
        trace = Trace(question, self.name, "fake-lm", {})
        if self.retriever is not None:
            trace.retrievals.append(Retrieval(question, self.retriever.search(question, self.k)))
        final = self.answers.get(question, "unknown")
        text = f"Some reasoning. So the answer is {final}."
        trace.steps.append(Step("generate", text, text, len(text.split())))
        return Answer(text, final, trace)


def method_factory(answers: dict[str, str] | None = None, sleep: float = 0.0, built: list | None = None):
    """A runner method_factory; ``built`` collects (config, retriever, method) per call."""

    def make(config: dict[str, Any], retriever):
        method = FakeMethod(retriever, answers, sleep)
        if built is not None:
            built.append((config, retriever, method))
        return method

    return make


@dataclass(frozen=True)
class FakeMethodFactory:
    """A picklable runner method_factory, for worker processes (local or Dask) that rebuild the
    method themselves: FakeMethods answering from ``answers``, sleeping ``sleep`` s a question and,
    with ``log``, appending "PID<TAB>question" to that file as each question starts. ``die_on``:
    a question whose worker process kills itself (SIGKILL) every time; ``fail_on``: one that raises."""

    answers: dict[str, str] | None = None
    sleep: float = 0.0
    log: str | None = None
    die_on: str | None = None
    fail_on: str | None = None

    def __call__(self, config: dict[str, Any], retriever):
        method = FakeMethod(retriever, self.answers, self.sleep, log=self.log)
        if self.die_on is None and self.fail_on is None:
            return method
        real = method.answer

        def answer(question: str) -> Answer:
            if question == self.die_on:
                os.kill(os.getpid(), signal.SIGKILL)
            if question == self.fail_on:
                raise ValueError(f"cannot answer {question!r}")
            return real(question)

        method.answer = answer  # type: ignore[method-assign]
        return method
