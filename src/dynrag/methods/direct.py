"""direct (wo-RAG): the model answers from what it knows, with no retrieval."""

from __future__ import annotations

import time
from typing import ClassVar

from dynrag.errors import DynragError
from dynrag.lm.base import LanguageModel
from dynrag.methods.answering import OnePassOptions, answer_once
from dynrag.methods.base import Answer, MethodOptions, MethodTraits, Trace
from dynrag.methods.budget import check_question
from dynrag.methods.prompting import PromptBuilder


class DirectOptions(OnePassOptions):
    pass


class Direct:
    name: ClassVar[str] = "direct"
    traits: ClassVar[MethodTraits] = MethodTraits(needs_retrieval=False)
    Options: ClassVar[type[MethodOptions]] = DirectOptions

    def __init__(self, lm: LanguageModel, builder: PromptBuilder, options: DirectOptions, retriever=None):
        self.lm, self.builder, self.options = lm, builder, options

    def answer(self, question: str) -> Answer:
        question = require_question(question)
        started = time.perf_counter()
        trace = Trace(question, self.name, self.lm.name, self.options.model_dump())
        return answer_once(self.lm, self.options.builder_for(self.builder), trace, question, None, self.options.max_new_tokens, started)


def require_question(question: str) -> str:
    """The question, stripped; an empty one, or one over the length limit, is an error."""
    if not question or not question.strip():
        raise DynragError("the question is empty; pass a question to answer")
    check_question(question.strip())
    return question.strip()
