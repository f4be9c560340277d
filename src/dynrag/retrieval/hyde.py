"""HyDE: the model writes a short hypothetical passage; retrieval searches with question + passage.

The passage need not be true: it only has to look like the passage that would answer the question,
so its words (names, dates, phrasing) match the corpus better than the bare question does. The
best-practices paper (seed 003) found one hypothetical document, concatenated with the query,
enough; more cost latency for little gain.
"""

from __future__ import annotations

from dynrag.lm.base import LanguageModel
from dynrag.retrieval.base import Hit, Retriever

# One worked example shows a small model the shape wanted: a few encyclopedic sentences, one line.
HYDE_PROMPT = (
    "Write a short encyclopedia passage that answers the question.\n\n"
    "Question: Which river flows through the city where the Lumière brothers were born?\n"
    "Passage: Auguste and Louis Lumière were born in Besançon, France. Besançon lies on the Doubs "
    "river, which loops around the old town.\n\n"
    "Question: {question}\n"
    "Passage:"
)


def hypothetical_passage(lm: LanguageModel, question: str, max_new_tokens: int = 64) -> tuple[str, int]:
    """(the passage the model writes for `question`, tokens decoded to write it)."""
    gen = lm.generate(HYDE_PROMPT.format(question=" ".join(question.split())), max_new_tokens, stop=("\n",))
    return " ".join(gen.text.split()), gen.decoded_tokens or len(gen)


def hyde_query(lm: LanguageModel, question: str, max_new_tokens: int = 64) -> str:
    """The question followed by a hypothetical passage (just the question when the model writes nothing)."""
    passage, _ = hypothetical_passage(lm, question, max_new_tokens)
    return join_query(question, passage)


def join_query(question: str, passage: str) -> str:
    return f"{question.strip()} {passage}".strip()


class HydeRetriever:
    """Wraps any retriever: each query is expanded with a hypothetical passage before searching."""

    def __init__(self, inner: Retriever, lm: LanguageModel, max_new_tokens: int = 64):
        self.inner, self.lm, self.max_new_tokens = inner, lm, max_new_tokens
        self.last_query: str | None = None  # the expanded query of the latest search, for traces

    def expand(self, query: str) -> str:
        return hyde_query(self.lm, query, self.max_new_tokens)

    def search(self, query: str, k: int) -> list[Hit]:
        self.last_query = self.expand(query)
        return self.inner.search(self.last_query, k)

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        return self.inner.search_batch([self.expand(q) for q in queries], k)
