"""FLARE: write the next sentence tentatively; if the model was unsure of any token, search with
the sentence minus those tokens and write the sentence again with the new documents."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from pydantic import Field

from dynrag.lm.base import require
from dynrag.methods.base import Answer, Step
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions


class FlareOptions(IterativeOptions):
    theta: float = Field(0.4, ge=0.0, le=1.0, description="retrieve when a token's probability is below this")
    max_sentence_tokens: int = Field(48, ge=4, description="longest sentence decoded in one step")


def masked_query(pieces: list[str], probabilities: np.ndarray, theta: float) -> str:
    """The sentence with its low-probability tokens removed (FLARE's masked query)."""
    return "".join(p for p, prob in zip(pieces, probabilities) if prob >= theta).strip()


class Flare(IterativeMethod):
    name: ClassVar[str] = "flare"
    Options: ClassVar[type] = FlareOptions

    def __init__(self, lm, builder, options, retriever):
        require(lm, "logprobs", needed_by="method 'flare'", instead="use fixed_sentence, which needs text only")
        super().__init__(lm, builder, options, retriever)

    def answer(self, question: str) -> Answer:
        state = self.start(question)
        theta = self.options.theta
        while not self.done(state):
            gen = self.generate(state, self.options.max_sentence_tokens, stop_after=SENTENCE_ENDS)
            probabilities = np.exp(gen.logprobs)
            low = [i for i, (piece, p) in enumerate(zip(gen.pieces, probabilities)) if p < theta and piece.strip()]
            details = {
                "tokens": gen.pieces,
                "probabilities": [round(float(p), 4) for p in probabilities],
                "low_probability": low,
            }
            if low and self.can_retrieve(state):
                state.trace.steps.append(Step("tentative", gen.text, "", gen.decoded_tokens, 0, details))
                query = masked_query(gen.pieces, probabilities, theta) or state.question
                self.retrieve(state, query, reason=f"{len(low)} tokens below p={theta}")
                gen = self.generate(state, self.options.max_sentence_tokens, stop_after=SENTENCE_ENDS)
                details = {"tokens": gen.pieces, "probabilities": [round(float(p), 4) for p in np.exp(gen.logprobs)],
                           "regenerated": True}
            self.keep(state, gen, details=details)
            if gen.stop_reason not in ("stop_after", "length"):
                break
        return self.finish(state)
