"""Stand-ins shared by the tests: fast, deterministic, with the interfaces of the real parts."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from dynrag.lm.base import Capabilities, Generation, Prompt
from dynrag.methods.base import Answer, Retrieval, Step, Trace
from dynrag.methods.deeprag.narrative import NarrativeStep
from dynrag.retrieval.base import BatchSearch, Hit
from tests.waiting import HANG_GUARD_S, wait_for


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
    ``sleep`` seconds per question let a test kill a run mid-way. ``meet`` (with ``log``): each
    question is held until that many processes have logged a start, so no one worker can answer
    them all before another is up, however slow start-up is.
    """

    name: ClassVar[str] = "fake"

    def __init__(self, retriever=None, answers: dict[str, str] | None = None, sleep: float = 0.0, k: int = 3,
                 log: str | None = None, hold_first: str | None = None, meet: int = 0):
        self.retriever, self.answers, self.sleep, self.k, self.log = retriever, answers or {}, sleep, k, log
        self.hold_first, self.meet = hold_first, meet
        self.calls: list[str] = []

    def answer(self, question: str) -> Answer:
        self.calls.append(question)
        if self.log:  # one short O_APPEND write per line: lines from several processes never mix
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(f"{os.getpid()}\t{question}\n")
        if question == self.hold_first and self._first_asking(question):
            time.sleep(HANG_GUARD_S)  # in flight until the test kills this process, however slow the machine
        if self.meet:
            wait_for(lambda: len(self._askers()) >= self.meet, f"{self.meet} processes to start a question",
                     last=self._askers)
        if self.sleep:
            time.sleep(self.sleep)
        trace = Trace(question, self.name, "fake-lm", {})
        if self.retriever is not None:
            trace.retrievals.append(Retrieval(question, self.retriever.search(question, self.k)))
        final = self.answers.get(question, "unknown")
        text = f"Some reasoning. So the answer is {final}."
        trace.steps.append(Step("generate", text, text, len(text.split())))
        return Answer(text, final, trace)

    def _askers(self) -> set[str]:
        with open(self.log, encoding="utf-8") as f:
            return {line.split("\t", 1)[0] for line in f if line.strip()}

    def _first_asking(self, question: str) -> bool:
        """Whether the line just logged is the only one for ``question`` (no process asked it before)."""
        with open(self.log, encoding="utf-8") as f:
            return sum(line.rstrip("\n").split("\t", 1)[1] == question for line in f) == 1


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
    a question whose worker process kills itself (SIGKILL) every time; ``fail_on``: one that raises;
    ``hold_first`` (with ``log``): one whose first asking stays in flight until a test kills its
    worker, while a second asking answers (so a kill lands mid-question by construction); ``meet``:
    hold every question until that many processes have started one (FakeMethod's ``meet``)."""

    answers: dict[str, str] | None = None
    sleep: float = 0.0
    log: str | None = None
    die_on: str | None = None
    fail_on: str | None = None
    hold_first: str | None = None
    meet: int = 0

    def __call__(self, config: dict[str, Any], retriever):
        method = FakeMethod(retriever, self.answers, self.sleep, log=self.log, hold_first=self.hold_first,
                            meet=self.meet)
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


class ScriptedLM:
    """A LanguageModel whose continuations come from a script: exact control over what a method sees.

    ``reply(prompt_text) -> str`` decides each continuation; generate() cuts it at a stop string and
    at ``max_new_tokens`` words (one "token" per word here), and records every prompt it was given.
    With ``scores(prompt_text, candidates)`` it also has the ``next_token_logprobs`` capability.
    """

    capabilities = Capabilities(attention=False, logprobs=True)

    def __init__(self, reply: Callable[[str], str], name: str = "scripted",
                 scores: Callable[[str, Sequence[str]], Sequence[float]] | None = None):
        self.reply, self.name = reply, name
        self.prompts: list[str] = []
        if scores is not None:  # the capability exists only then
            self.scores = scores
            self.next_token_logprobs = self._next_token_logprobs
            self.capabilities = Capabilities(attention=False, logprobs=True, next_token_logprobs=True)

    def _next_token_logprobs(self, prompt, candidates):
        text = Prompt.of(prompt).text
        self.prompts.append(text)
        return np.asarray(self.scores(text, list(candidates)), dtype=np.float64)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def generate(self, prompt, max_new_tokens, stop=(), capture_attention=False, stop_after=(), stop_when=None):
        prompt = Prompt.of(prompt)
        self.prompts.append(prompt.text)
        text = self.reply(prompt.text)
        reason = "eos"
        for s in stop:
            if s and s in text:
                text, reason = text[: text.index(s)], "stop"
        words = text.split(" ")
        if len(words) > max_new_tokens:
            text, reason = " ".join(words[:max_new_tokens]), "length"
        pieces = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))] if text else []
        n = len(pieces)
        return Generation(
            prompt=prompt, prompt_token_ids=[], prompt_offsets=[], prompt_raw_tokens=[],
            token_ids=list(range(n)), pieces=pieces, raw_tokens=pieces,
            logprobs=np.zeros(n, dtype=np.float32), entropies=np.zeros(n, dtype=np.float32),
            attention=None, stop_reason=reason, decoded_tokens=n,
        )


class SteppingLM:
    """Decodes ``max_new_tokens`` dummy tokens, calling ``stop_when`` after each as a real backend
    does, until it says stop ("stopped") or the tokens run out ("done"); counts the tokens."""

    name = "stepping"
    capabilities = None

    def __init__(self):
        self.tokens = 0

    def generate(self, prompt, max_new_tokens, stop=(), capture_attention=False, stop_after=(), stop_when=None):
        for _ in range(max_new_tokens):
            self.tokens += 1
            if stop_when is not None and stop_when(self):
                return "stopped"
            time.sleep(0.001)
        return "done"

    def helper(self, x):
        return x * 2


class CallCountingLM:
    """Another model (``lm``) seen through a wrapper that counts its generate calls; ``name``
    overrides the model's name."""

    def __init__(self, lm, name=None):
        self.lm, self.calls = lm, 0
        self.name = name or lm.name

    def generate(self, *args, **kwargs):
        self.calls += 1
        return self.lm.generate(*args, **kwargs)


class ScriptedTree:
    """An Expander for DeepRAG's tree search (deeprag/search.py): two sub-questions, and the final
    answer is right only after the decisions in `correct_path` (or any in `also_correct`).
    Records what it was asked."""

    def __init__(self, correct_path=(False, True), subqueries=("q1", "q2"), also_correct=()):
        self.correct_path, self.subqueries = tuple(correct_path), subqueries
        self.also_correct = {tuple(p) for p in also_correct}
        self.answered: list[tuple[tuple[bool, ...], bool]] = []
        self.finals: list[tuple[bool, ...]] = []

    def next_subquery(self, history):
        return self.subqueries[len(history)] if len(history) < len(self.subqueries) else None

    def answer(self, history, subquery, retrieve):
        self.answered.append((tuple(s.retrieve for s in history), retrieve))
        return NarrativeStep(subquery, retrieve, "from passages" if retrieve else "from memory")

    def final_answer(self, history):
        path = tuple(s.retrieve for s in history)
        self.finals.append(path)
        return "right" if path == self.correct_path or path in self.also_correct else "wrong"

    def is_correct(self, answer):
        return answer == "right"


class GatedRetriever:
    """A real retriever behind a gate the test opens and closes: while it is closed, every search
    waits at the gate, so a retrieving request stays in flight for as long as the test wants
    (past any timeout, by construction, however fast or slow the machine), and ``waiting`` counts
    the searches held there. Open, it passes searches through."""

    def __init__(self, inner):
        self.inner = inner
        self._open = threading.Event()
        self._open.set()
        self._lock = threading.Lock()
        self.waiting = 0

    def close(self) -> None:
        self._open.clear()

    def open(self) -> None:
        self._open.set()

    def _pass(self) -> None:
        with self._lock:
            self.waiting += 1
        try:
            self._open.wait(HANG_GUARD_S)
        finally:
            with self._lock:
                self.waiting -= 1

    def search(self, query: str, k: int) -> list[Hit]:
        self._pass()
        return self.inner.search(query, k)

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        self._pass()
        return self.inner.search_batch(queries, k)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
