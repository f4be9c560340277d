"""The atomic decision after a sub-question: retrieve, or answer from the model's own knowledge.

`margin` mode scores the first token of each marker in one forward pass:
margin = log P(retrieve marker) - log P(answer marker) + bias, and retrieves when margin > 0.
A positive bias makes the model retrieve more, a negative one less; the trace keeps each margin,
so one can see how close every decision was and choose a bias on held-out questions.

`always` and `never` take no decision at all: every sub-question is answered with retrieved passages,
or every one from the model's own knowledge. They are the two extreme inference strategies the
DeepRAG paper compares its atomic decisions with (§5.5, Figure 4).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dynrag.lm.base import LanguageModel, Prompt, require
from dynrag.methods.deeprag.narrative import ANSWER, RETRIEVE


# The fixed strategies: decision mode -> whether every sub-question retrieves.
FIXED_DECISIONS = {"always": True, "never": False}


def decision_margin(logprob_retrieve: float, logprob_answer: float, bias: float = 0.0) -> float:
    return float(logprob_retrieve) - float(logprob_answer) + float(bias)


def wants_retrieval(margin: float) -> bool:
    return margin > 0.0


def next_token_logprobs(lm: LanguageModel, prompt: Prompt, candidates: Sequence[str]) -> np.ndarray:
    """log P(first token of each candidate | prompt), from a backend that can score next tokens."""
    require(lm, "next_token_logprobs", needed_by="deeprag with decision=margin", instead="use decision=generate")
    return np.asarray(lm.next_token_logprobs(prompt, list(candidates)), dtype=np.float64)


def marker_margin(lm: LanguageModel, prompt: Prompt, bias: float = 0.0) -> tuple[float, float, float]:
    """(margin, log P(retrieve marker), log P(answer marker)) at the end of `prompt`."""
    lp_retrieve, lp_answer = next_token_logprobs(lm, prompt, [RETRIEVE, ANSWER])
    return decision_margin(lp_retrieve, lp_answer, bias), float(lp_retrieve), float(lp_answer)
