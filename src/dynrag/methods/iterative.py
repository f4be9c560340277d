"""Shared machinery of the methods that interleave generation and retrieval.

Each method owns its loop (when to stop decoding, when to retrieve, what to ask); this module holds
what the loops share: the answer written so far, the current documents (each retrieval replaces
them), the token and retrieval budgets, and how a finished answer is produced.

Every retrieval goes through the retrieval chain (methods/chain.py), so the chain options
(``preset``, ``rerank``, ``repack``, ``compress``, ``query_transform``) shape each of a method's
retrievals; query classification, when on, decides once per question, before generation, whether
the method may retrieve at all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import Field

from dynrag.lm.base import Generation
from dynrag.methods.answering import complete_answer
from dynrag.methods.base import Answer, MethodOptions, ReasoningOptions, Retrieval, Step, Trace
from dynrag.methods.chain import ChainOptions, RetrievingMethod
from dynrag.methods.direct import require_question
from dynrag.methods.prompting import ANSWER_STOPS, has_complete_answer
from dynrag.retrieval.base import Hit

# A sentence ends at one of these; the trailing space is only seen when the next token arrives.
SENTENCE_ENDS = (". ", "? ", "! ")


class IterativeOptions(ChainOptions, ReasoningOptions):
    max_new_tokens: int = Field(128, ge=1, description="budget of kept answer tokens")
    max_retrievals: int = Field(5, ge=0, description="hard cap on retrievals per question")
    max_steps: int = Field(24, ge=1, description="hard cap on generation calls per question")
    # Kept tokens are budgeted above; decoded ones, thrown-away chunks included, were not, and one
    # degenerate question could decode for minutes unseen. An answer that reaches this is cut and
    # marked (Trace.cut, and the summary's cut_answers).
    max_generated_tokens: int | None = Field(
        None, ge=1, description="hard cap on decoded tokens per question, discarded ones included "
                                "(default: four times max_new_tokens); an answer that reaches it is cut")


@dataclass
class LoopState:
    question: str
    trace: Trace
    started: float
    answer: str = ""  # the kept continuation after "Answer:", exactly as generated
    hits: list[Hit] = field(default_factory=list)
    kept_tokens: int = 0
    steps: int = 0
    stalled: int = 0  # consecutive steps that kept nothing
    may_retrieve: bool = True  # False when query classification said the question needs no retrieval


class IterativeMethod(RetrievingMethod):
    name: ClassVar[str] = "iterative"
    Options: ClassVar[type[MethodOptions]] = IterativeOptions

    # -- loop pieces ---------------------------------------------------------------------

    def start(self, question: str) -> LoopState:
        question = require_question(question)
        trace = Trace(question, self.name, self.lm.name, self.options.model_dump())
        state = LoopState(question=question, trace=trace, started=time.perf_counter())
        state.may_retrieve = self.chain.needs_retrieval(question, trace)
        return state

    def remaining_tokens(self, state: LoopState) -> int:
        return max(0, self.options.max_new_tokens - state.kept_tokens)

    def decoding_budget(self) -> int:
        return self.options.max_generated_tokens or 4 * self.options.max_new_tokens

    def decoding_left(self, state: LoopState) -> int:
        return max(0, self.decoding_budget() - state.trace.generated_tokens)

    def can_retrieve(self, state: LoopState) -> bool:
        return state.may_retrieve and len(state.trace.retrievals) < self.options.max_retrievals

    def done(self, state: LoopState) -> bool:
        if has_complete_answer(state.answer, self.builder.answer_phrase):
            return True
        if self.decoding_left(state) == 0:  # the only stop that leaves the answer short of its end
            state.trace.cut = (f"cut after {state.trace.generated_tokens} decoded tokens "
                               f"(max_generated_tokens {self.decoding_budget()})")
            return True
        return self.remaining_tokens(state) == 0 or state.steps >= self.options.max_steps or state.stalled >= 2

    def generate(self, state: LoopState, max_tokens: int, *, within_budget: bool = True, **kwargs: Any) -> Generation:
        """One decoding call of at most `max_tokens`; cut to the tokens left in the budget unless
        `within_budget` is False (DRAGIN's `reference` variant decodes whole chunks, as the authors do)."""
        tokens = max(1, min(max_tokens, self.remaining_tokens(state)) if within_budget else max_tokens)
        tokens = max(1, min(tokens, self.decoding_left(state)))
        prompt = self.builder.build(state.question, state.hits or None, state.answer, lm=self.lm,
                                    max_new_tokens=tokens)
        state.trace.note_prompt(prompt)
        state.steps += 1
        return self.lm.generate(prompt, tokens, stop=ANSWER_STOPS, **kwargs)

    def keep(self, state: LoopState, gen: Generation, n_tokens: int | None = None,
             kind: str = "generate", details: dict[str, Any] | None = None) -> str:
        """Append the first `n_tokens` generated tokens (all by default) to the answer."""
        n = len(gen) if n_tokens is None else n_tokens
        kept = "".join(gen.pieces[:n])
        if not state.answer:
            kept = kept.lstrip()
        state.answer += kept
        state.kept_tokens += n
        state.stalled = state.stalled + 1 if n == 0 else 0
        state.trace.steps.append(
            Step(kind, gen.text, kept, gen.decoded_tokens or len(gen), n, details or {})
        )
        return kept

    def retrieve(self, state: LoopState, query: str, reason: str) -> list[Hit]:
        """Search through the chain (recording the Retrieval and the chain's steps in the trace)."""
        query = " ".join(query.split())
        if query:
            hits = self.chain.retrieve(query, state.trace, position=state.kept_tokens, reason=reason)
        else:
            hits = []
            state.trace.retrievals.append(Retrieval(query, hits, position=state.kept_tokens, reason=reason))
        # New documents replace the old ones, so the prompt holds the latest retrieval only; an empty
        # result keeps what we had.
        if hits:
            state.hits = hits
        return hits

    def finish(self, state: LoopState) -> Answer:
        answer = complete_answer(
            self.lm, self.builder, state.trace, state.question, state.hits or None, state.answer
        )
        state.trace.seconds = time.perf_counter() - state.started
        return answer


def ends_sentence(piece: str) -> bool:
    return any(ch in piece for ch in ".?!\n")
