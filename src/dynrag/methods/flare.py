"""FLARE (Jiang et al., 2023): look ahead one sentence, and retrieve only when the model was unsure.

Each step writes the next sentence tentatively *without* documents (the look-ahead). If any token's
probability is below ``theta`` (or, as DRAGIN's reimplementation does, the sentence's mean
probability), FLARE searches and writes the sentence again with the new documents; otherwise the
tentative sentence is kept. The query is the tentative sentence with its tokens below ``beta``
masked out (implicit), or questions the model writes about each span of words below ``beta``
(explicit); ``theta`` only decides whether to retrieve.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from dynrag.lm.base import Generation, require
from dynrag.methods.base import Answer, Retrieval, Step, Trace
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions, LoopState
from dynrag.methods.query_forms import masked_query, previous_sentence
from dynrag.retrieval.base import Hit
from dynrag.text.words import merge_words


class FlareOptions(IterativeOptions):
    theta: float = Field(0.4, ge=0.0, le=1.0, description="retrieve when a token's probability is below this")
    beta: float | None = Field(
        None, ge=0.0, le=1.0, description="masked query: drop tokens whose probability is below this; None: theta"
    )
    trigger: Literal["any", "mean"] = Field(
        "any", description="any: some token's probability < theta (FLARE); mean: the sentence's mean < theta (DRAGIN's reimplementation)"
    )
    query: Literal["masked", "questions", "previous_sentence"] = Field(
        "masked", description="masked: the sentence minus uncertain tokens (implicit); questions: one LM-written "
        "question per uncertain span (explicit); previous_sentence: the last finished sentence (DRAGIN's Table 4)"
    )
    first_retrieval: bool = Field(False, description="retrieve with the question before the first sentence")
    tentative_with_documents: bool = Field(
        False, description="write the look-ahead with the previous documents (FLARE writes it without)"
    )
    max_sentence_tokens: int = Field(48, ge=4, description="longest sentence decoded in one step")
    question_tokens: int = Field(24, ge=4, description="longest generated question (query=questions)")


def uncertain_spans(raw_tokens: list[str], pieces: list[str], probabilities: np.ndarray, beta: float) -> list[str]:
    """Runs of consecutive words holding a token below ``beta``, as text (FLARE's spans z: the paper
    cuts them with the masking threshold beta, not with the trigger's theta)."""
    spans: list[list[str]] = []
    previous = -2
    for k, word in enumerate(merge_words(raw_tokens, pieces)):
        if (np.asarray(probabilities[word.start : word.end]) < beta).any():
            if k == previous + 1 and spans:
                spans[-1].append(word.text)
            else:
                spans.append([word.text])
            previous = k
    return [" ".join(s) for s in spans]


def is_uncertain(pieces: list[str], probabilities: np.ndarray, theta: float, trigger: str) -> bool:
    """``any``: some (non-blank) token's probability is below ``theta``; ``mean``: their mean is."""
    counted = [float(p) for piece, p in zip(pieces, probabilities) if piece.strip()]
    if not counted:
        return False
    return min(counted) < theta if trigger == "any" else float(np.mean(counted)) < theta


def interleave(hit_lists: list[list[Hit]], k: int) -> list[Hit]:
    """Round-robin over several rankings, each passage once, until ``k`` are taken."""
    out: list[Hit] = []
    seen: set[str] = set()
    for rank in range(max((len(h) for h in hit_lists), default=0)):
        for hits in hit_lists:
            if rank < len(hits) and hits[rank].id not in seen:
                seen.add(hits[rank].id)
                out.append(hits[rank])
                if len(out) == k:
                    return out
    return out


class Flare(IterativeMethod):
    name: ClassVar[str] = "flare"
    Options: ClassVar[type] = FlareOptions

    def __init__(self, lm, builder, options, retriever):
        require(lm, "logprobs", needed_by="method 'flare'", instead="use fixed_sentence, which needs text only")
        super().__init__(lm, builder, options, retriever)

    @property
    def beta(self) -> float:
        return self.options.theta if self.options.beta is None else self.options.beta

    def answer(self, question: str) -> Answer:
        state = self.start(question)
        state.trace.options["beta"] = self.beta  # the resolved value, not None
        theta = self.options.theta
        step_documents: list[Hit] = []  # documents retrieved for the coming sentence only
        if self.options.first_retrieval and self.can_retrieve(state):
            self.retrieve(state, state.question, reason="first retrieval, with the question")
            step_documents = state.hits
        while not self.done(state):
            lookahead = state.hits if self.options.tentative_with_documents else step_documents
            gen = self._sentence(state, lookahead)
            probabilities = np.exp(gen.logprobs)
            low = [i for i, (piece, p) in enumerate(zip(gen.pieces, probabilities)) if p < theta and piece.strip()]
            details = {
                "tokens": gen.pieces,
                "probabilities": [round(float(p), 4) for p in probabilities],
                "low_probability": low,
            }
            if is_uncertain(gen.pieces, probabilities, theta, self.options.trigger) and self.can_retrieve(state):
                state.trace.steps.append(Step("tentative", gen.text, "", gen.decoded_tokens, 0, details))
                self._search(state, gen, probabilities, len(low))
                gen = self._sentence(state, state.hits)
                details = {"tokens": gen.pieces, "probabilities": [round(float(p), 4) for p in np.exp(gen.logprobs)],
                           "regenerated": True}
            self.keep(state, gen, details=details)
            step_documents = []
            if gen.stop_reason not in ("stop_after", "length"):
                break
        return self.finish(state)

    def _sentence(self, state: LoopState, documents: list[Hit]) -> Generation:
        """The next sentence, written with exactly `documents` (none: the look-ahead)."""
        kept, state.hits = state.hits, documents
        try:
            return self.generate(state, self.options.max_sentence_tokens, stop_after=SENTENCE_ENDS)
        finally:
            state.hits = kept

    def _search(self, state: LoopState, gen: Generation, probabilities: np.ndarray, n_low: int) -> None:
        reason = (f"{n_low} tokens below p={self.options.theta}" if self.options.trigger == "any"
                  else f"mean p < {self.options.theta}")
        masked = masked_query(gen.pieces, probabilities, self.beta) or state.question
        if self.options.query in ("masked", "previous_sentence"):
            query = masked if self.options.query == "masked" else previous_sentence(state.question, state.answer)
            self.retrieve(state, query, reason=reason)
            return
        spans = uncertain_spans(gen.raw_tokens, gen.pieces, probabilities, self.beta)  # the paper's spans: below beta
        questions = [q for q in (self._ask(state, gen.text, z) for z in spans) if q] or [masked]
        # Each question goes through the retrieval chain; the rankings are merged into one retrieval.
        scratch = Trace(state.question, self.name, self.lm.name)
        ranked = [self.chain.retrieve(q, scratch, position=state.kept_tokens, reason=reason) for q in questions]
        state.trace.steps.extend(scratch.steps)
        hits = interleave(ranked, self.options.k)
        state.trace.retrievals.append(
            Retrieval(" | ".join(questions), hits, position=state.kept_tokens, reason=f"{reason}; {len(questions)} questions")
        )
        if hits:
            state.hits = hits

    def _ask(self, state: LoopState, tentative: str, span: str) -> str:
        """A question the model writes whose answer would be `span` (FLARE's explicit query)."""
        written = (state.answer + " " + tentative).strip()
        prompt = (f"Question: {state.question}\nPartial answer: {written}\n\n"
                  f"Write one question whose answer is \"{span}\".\nQuestion:")
        gen = self.lm.generate(prompt, self.options.question_tokens, stop=("\n",), stop_after=("?",))
        state.trace.steps.append(Step("question", gen.text, "", gen.decoded_tokens, 0, {"span": span}))
        return gen.text.strip()
