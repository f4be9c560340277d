"""HyDE: the model writes a short hypothetical passage; retrieval searches with question + passage.

The passage need not be true: it only has to look like the passage that would answer the question,
so its words (names, dates, phrasing) match the corpus better than the bare question does. The
best-practices paper (Wang et al., 2024) found one hypothetical document, concatenated with the query,
enough; more cost latency for little gain. ``dynrag eval-retrieval`` also measures the passage
alone and several passages (retrieval/query_transforms.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynrag.lm.base import LanguageModel
from dynrag.retrieval.query_prompts import QueryPrompt

if TYPE_CHECKING:
    from dynrag.lm.chat import ChatFrame
    from dynrag.lm.row_decode import Sampling

# One worked example shows a small model the shape wanted: a few encyclopedic sentences, one line.
HYDE = QueryPrompt(
    kind="hyde",
    instruction="Write a short encyclopedia passage that answers the question.",
    examples=(
        "Question: Which river flows through the city where the Lumière brothers were born?\n"
        "Passage: Auguste and Louis Lumière were born in Besançon, France. Besançon lies on the Doubs "
        "river, which loops around the old town.\n\n"
    ),
    label="Passage:",
    stop=("\n",),
)
# The plain-text prompt (the one a model not prompted in the chat style reads).
HYDE_PROMPT = HYDE.template()


def hypothetical_passage(lm: LanguageModel, question: str, max_new_tokens: int = 64,
                         frame: ChatFrame | None = None, sampling: Sampling | None = None) -> tuple[str, int]:
    """(the passage the model writes for `question`, tokens decoded to write it); ``frame``: the
    model's chat frame when it is prompted in the chat style; ``sampling``: drawn, not greedy."""
    return HYDE.write(lm, question, max_new_tokens, frame, sampling)


def join_query(question: str, passage: str) -> str:
    """What HyDE searches with: the question followed by its hypothetical passage."""
    return f"{question.strip()} {passage}".strip()


def join_passages(question: str, passages: list[str]) -> str:
    """The question followed by several hypothetical passages, in order (empty ones left out)."""
    return " ".join([question.strip(), *(p for p in passages if p)]).strip()
