"""What SeaKR searches for once it is unsure of a step (pure functions of the step's tokens).

The step the model was unsure of (its greedy "pseudo-generation") is the raw material. ``paper``:
the step with the tokens the model doubted left out, as FLARE masks its implicit query. ``reference``:
the authors' rule, word by word: a word stays when it also appears in the question or in the
previous step, or when none of its tokens has 1 - p above ``max_doubt``; only content words are
kept, and the question's content words stand in when nothing is left.
"""

from __future__ import annotations

import math
from typing import Sequence

from dynrag.methods.query_forms import masked_query
from dynrag.text.content import content_flags
from dynrag.text.stopwords import strip_punctuation
from dynrag.text.words import merge_words

# Words of the answer sentence itself, which the authors drop from a query besides the part of speech.
ANSWER_WORDS = frozenset({"thus", "answer", "is", "so"})


def content_only(words: Sequence[str]) -> list[str]:
    """The content words of ``words`` (stopword rule), punctuation stripped, answer words dropped."""
    bare = [strip_punctuation(w) for w in words]
    bare = [w for w in bare if w and w.lower() not in ANSWER_WORDS]
    return [w for w, keep in zip(bare, content_flags(bare, "stopwords")) if keep]


def masked_step_query(pieces: Sequence[str], logprobs: Sequence[float], max_doubt: float, question: str) -> str:
    """``paper``: the step without its tokens whose probability is below 1 - ``max_doubt``; the
    question when nothing is left."""
    kept = masked_query(pieces, [math.exp(lp) for lp in logprobs], 1.0 - max_doubt)
    return " ".join(kept.split()) or " ".join(question.split())


def authors_step_query(raw_tokens: list[str], pieces: list[str], logprobs: Sequence[float], max_doubt: float,
                       question: str, previous_step: str) -> str:
    """``reference``: the confident or already-known words of the step, content words only."""
    sure = []
    for word in merge_words(raw_tokens, pieces):
        text = strip_punctuation(word.text.strip())  # as the authors compare words: letters and digits only
        if not text:
            continue
        doubt = max(1.0 - math.exp(lp) for lp in logprobs[word.start:word.end])
        # A substring test, as the authors make it: "Paris" counts as known in "Parisian".
        if text in question or (previous_step and text in previous_step) or doubt <= max_doubt:
            sure.append(text)
    return " ".join(content_only(sure)) or " ".join(content_only(question.split()))
