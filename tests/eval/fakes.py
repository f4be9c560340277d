"""A fast stand-in Method for runner tests: real Answer/Trace objects, real retriever calls."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from dynrag.methods.base import Answer, Retrieval, Step, Trace


class FakeMethod:
    """Retrieves once with the question (when it has a retriever) and answers from a lookup table.

    ``answers`` maps question -> final answer; questions not in it get "unknown".
    ``sleep`` seconds per question let a test kill a run mid-way.
    """

    name: ClassVar[str] = "fake"

    def __init__(self, retriever=None, answers: dict[str, str] | None = None, sleep: float = 0.0, k: int = 3):
        self.retriever, self.answers, self.sleep, self.k = retriever, answers or {}, sleep, k
        self.calls: list[str] = []

    def answer(self, question: str) -> Answer:
        self.calls.append(question)
        if self.sleep:
            time.sleep(self.sleep)
        trace = Trace(question, self.name, "fake-lm", {})
        if self.retriever is not None:
            trace.retrievals.append(Retrieval(question, self.retriever.search(question, self.k)))
        final = self.answers.get(question, "unknown")
        text = f"Some reasoning. So the answer is {final}."
        trace.steps.append(Step("generate", text, text, len(text.split())))
        return Answer(text, final, trace)


def factory(answers: dict[str, str] | None = None, sleep: float = 0.0, built: list | None = None):
    """A runner method_factory; ``built`` collects (config, retriever, method) per call."""

    def make(config: dict[str, Any], retriever):
        method = FakeMethod(retriever, answers, sleep)
        if built is not None:
            built.append((config, retriever, method))
        return method

    return make
