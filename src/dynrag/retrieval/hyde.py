"""HyDE: the model writes a short hypothetical passage; retrieval searches with question + passage.

The passage need not be true: it only has to look like the passage that would answer the question,
so its words (names, dates, phrasing) match the corpus better than the bare question does. The
best-practices paper (Wang et al., 2024) found one hypothetical document, concatenated with the query,
enough; more cost latency for little gain.
"""

from __future__ import annotations

from dynrag.lm.base import LanguageModel

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


def join_query(question: str, passage: str) -> str:
    """What HyDE searches with: the question followed by its hypothetical passage."""
    return f"{question.strip()} {passage}".strip()
