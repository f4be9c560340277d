"""single (SR-RAG): retrieve once with the question, put the top-k passages in the prompt, answer."""

from __future__ import annotations

import time
from typing import ClassVar

from dynrag.lm.base import LanguageModel
from dynrag.methods.answering import answer_once
from dynrag.methods.base import Answer, MethodOptions, Retrieval, Trace
from dynrag.methods.direct import require_question
from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Retriever


class SingleOptions(MethodOptions):
    pass


class Single:
    name: ClassVar[str] = "single"
    Options: ClassVar[type[MethodOptions]] = SingleOptions

    def __init__(self, lm: LanguageModel, builder: PromptBuilder, options: SingleOptions, retriever: Retriever):
        self.lm, self.builder, self.options, self.retriever = lm, builder, options, retriever

    def answer(self, question: str) -> Answer:
        question = require_question(question)
        started = time.perf_counter()
        trace = Trace(question, self.name, self.lm.name, self.options.model_dump())
        hits = self.retriever.search(question, self.options.k)
        trace.retrievals.append(Retrieval(query=question, hits=hits, position=0, reason="before generation"))
        return answer_once(self.lm, self.builder, trace, question, hits, self.options.max_new_tokens, started)
