"""Fixed-schedule baselines: retrieve every n tokens (fixed_length) or every sentence (fixed_sentence)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from dynrag.methods.base import Answer
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions
from dynrag.methods.query_forms import previous_sentence


class FixedOptions(IterativeOptions):
    first_retrieval: bool = Field(
        False, description="retrieve with the question before the first step (as DRAGIN's released FL-RAG/FS-RAG do)"
    )


def retrieve_first(method: IterativeMethod, state) -> None:
    if method.options.first_retrieval and method.can_retrieve(state):
        method.retrieve(state, state.question, reason="first retrieval, with the question")


class FixedLengthOptions(FixedOptions):
    n: int = Field(16, ge=1, description="tokens generated between retrievals; the query is those tokens")
    query: Literal["window", "previous_sentence"] = Field(
        "window", description="window: the n tokens just written; previous_sentence: the last finished sentence "
        "(DRAGIN's Table 4)",
    )


class FixedLength(IterativeMethod):
    """FL-RAG: generate n tokens, retrieve with them, continue with the new documents."""

    name: ClassVar[str] = "fixed_length"
    Options: ClassVar[type] = FixedLengthOptions

    def answer(self, question: str) -> Answer:
        state = self.start(question)
        retrieve_first(self, state)
        while not self.done(state):
            gen = self.generate(state, self.options.n)
            kept = self.keep(state, gen)
            if gen.stop_reason != "length" or self.done(state):
                break
            if self.can_retrieve(state):
                query = kept if self.options.query == "window" else previous_sentence(state.question, state.answer)
                self.retrieve(state, query, reason=f"every {self.options.n} tokens")
        return self.finish(state)


class FixedSentenceOptions(FixedOptions):
    max_sentence_tokens: int = Field(48, ge=4, description="longest sentence decoded in one step")


class FixedSentence(IterativeMethod):
    """FS-RAG: generate one sentence, retrieve with it, write the next sentence with the new documents."""

    name: ClassVar[str] = "fixed_sentence"
    Options: ClassVar[type] = FixedSentenceOptions

    def answer(self, question: str) -> Answer:
        state = self.start(question)
        retrieve_first(self, state)
        while not self.done(state):
            gen = self.generate(state, self.options.max_sentence_tokens, stop_after=SENTENCE_ENDS)
            sentence = self.keep(state, gen)
            # Only a finished sentence continues the loop; a line end or EOS ends the answer.
            if gen.stop_reason not in ("stop_after", "length") or self.done(state):
                break
            if self.can_retrieve(state) and sentence.strip():
                self.retrieve(state, sentence, reason="after a sentence")
        return self.finish(state)
