"""single (SR-RAG): retrieve once with the question, put the top-k passages in the prompt, answer.

With chain options (methods/chain.py) the retrieval becomes the best-practice chain: query
classification (may skip retrieval: the model then answers directly), HyDE, reranking, repacking
and compression; `preset=balanced` / `preset=best` choose the paper's recommended settings. All
off by default: plain top-k retrieval for the question.
"""

from __future__ import annotations

import time
from typing import ClassVar

from dynrag.methods.answering import OnePassOptions, answer_once
from dynrag.methods.base import Answer, MethodOptions, Trace
from dynrag.methods.chain import ChainOptions, RetrievingMethod
from dynrag.methods.direct import require_question


class SingleOptions(ChainOptions, OnePassOptions):
    pass


class Single(RetrievingMethod):
    name: ClassVar[str] = "single"
    Options: ClassVar[type[MethodOptions]] = SingleOptions

    def answer(self, question: str) -> Answer:
        question = require_question(question)
        started = time.perf_counter()
        trace = Trace(question, self.name, self.lm.name, self.options.model_dump())
        hits = self.chain.retrieve(question, trace) if self.chain.needs_retrieval(question, trace) else None
        return answer_once(self.lm, self.options.builder_for(self.builder), trace, question, hits, self.options.max_new_tokens, started)
