"""LM-pointwise reranking: the probability the model answers "yes" to "is this passage useful?".

The analogue of monoT5 (a model fine-tuned to say "true"/"false" for query-passage relevance)
with whatever causal LM answers the questions: one forward pass per passage, then

    score = P(yes) / (P(yes) + P(no))

where P(yes) sums the next-token probabilities of the first tokens of " yes" and " Yes" (and P(no)
of " no" and " No"). Normalising over the two answers removes how much probability the model puts
on anything else, which varies from passage to passage and says nothing about relevance.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dynrag.errors import ConfigError
from dynrag.lm.base import clip_to_bytes, context_window, require
from dynrag.rerank.base import passage_text, ranked
from dynrag.retrieval.base import Hit

RELEVANCE_PROMPT = (
    "Passage: {passage}\n\n"
    "Question: {question}\n"
    "Is this passage useful for answering the question? Answer yes or no.\n"
    "Answer:"
)


def yes_probability(logprobs: np.ndarray, n_yes: int) -> float:
    """P(yes) / (P(yes) + P(no)) from next-token log-probabilities: the first `n_yes` entries are
    the "yes" spellings, the rest the "no" spellings."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    yes = np.logaddexp.reduce(logprobs[:n_yes])
    no = np.logaddexp.reduce(logprobs[n_yes:])
    return float(1.0 / (1.0 + np.exp(no - yes)))


class LMPointwiseReranker:
    name = "lm"

    def __init__(
        self,
        lm,
        yes: Sequence[str] = (" yes", " Yes"),
        no: Sequence[str] = (" no", " No"),
        max_passage_words: int = 200,
    ):
        require(lm, "next_token_logprobs", needed_by="rerank=lm", instead="use rerank=embedding")
        if not yes or not no:
            raise ValueError("need at least one 'yes' and one 'no' spelling")
        self.lm, self.yes, self.no = lm, tuple(yes), tuple(no)
        self.max_passage_words = max_passage_words
        yes_ids = {lm.first_token_id(w) for w in self.yes}
        no_ids = {lm.first_token_id(w) for w in self.no}
        if yes_ids & no_ids:
            raise ConfigError(
                f"rerank=lm: model {getattr(lm, 'name', lm)!r} tokenizes the 'yes' {self.yes} and 'no' {self.no} "
                "answers to a shared first token, so it cannot tell them apart; use rerank=embedding"
            )

    def prompt(self, query: str, hit: Hit) -> str:
        words = passage_text(hit).split()
        passage = " ".join(words[: self.max_passage_words])[: self.max_passage_words * 24]  # a "word" may be huge
        question = " ".join(query.split())
        window = context_window(self.lm)
        if window is not None:  # within the model's window, the passage giving way
            room = window - 16 - len(RELEVANCE_PROMPT.format(passage="", question=question).encode("utf-8"))
            passage = clip_to_bytes(passage, room)
        return RELEVANCE_PROMPT.format(passage=passage, question=question)

    def score(self, query: str, hit: Hit) -> float:
        logprobs = self.lm.next_token_logprobs(self.prompt(query, hit), self.yes + self.no)
        return yes_probability(logprobs, len(self.yes))

    def rerank(self, query: str, hits: list[Hit], top_k: int) -> list[Hit]:
        return ranked(hits, [self.score(query, h) for h in hits], top_k)
