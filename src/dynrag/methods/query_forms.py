"""Ways to turn the moment retrieval fires into a query (pure functions on text): the forms DRAGIN's
Table 6 puts in QFS's place once RIND has fired, and the last finished sentence its Table 4 gives
every method (FLARE and FL-RAG take ``query=previous_sentence`` too).

At the trigger the answer has been cut: ``answer_so_far`` is what was kept before the trigger
(the paper variant cuts at the triggering word, the reference variant at the start of its
sentence), and ``sentence`` is the triggering sentence as it was written, with each token's
probability. Each form is another method's way to turn that moment into a query:

- ``previous_sentence`` (FS-RAG): the last complete sentence before the trigger;
- ``last_words`` (FL-RAG): the last N words before the trigger (FL-RAG counts 25 tokens; words here,
  so the query does not depend on the model's tokenizer);
- ``confident_sentence`` (FLARE): the triggering sentence without its tokens below a probability;
- ``full_context``: the question and everything written so far.

Where a form finds nothing (the trigger in the first sentence), the query is the question.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from dynrag.text.sentences import split_sentences

QueryForm = Literal["qfs", "previous_sentence", "last_words", "confident_sentence", "full_context"]
QUERY_FORMS: tuple[str, ...] = ("qfs", "previous_sentence", "last_words", "confident_sentence", "full_context")


def previous_sentence(question: str, answer_so_far: str) -> str:
    """The last complete sentence of ``answer_so_far`` (a trailing fragment is the triggering
    sentence's own start, not a finished sentence); the question when there is none."""
    sentences = split_sentences(answer_so_far)
    if sentences and not answer_so_far.rstrip().endswith((".", "!", "?")):
        sentences = sentences[:-1]
    return sentences[-1] if sentences else question.strip()


def last_words(question: str, answer_so_far: str, n: int) -> str:
    """The last ``n`` words before the trigger, reaching back into the question when the answer is short."""
    words = (question.split() + answer_so_far.split())[-n:]
    return " ".join(words)


def masked_query(pieces: Sequence[str], probabilities: Sequence[float], beta: float) -> str:
    """The sentence with its tokens below ``beta`` removed (FLARE's implicit, masked query)."""
    return "".join(p for p, prob in zip(pieces, probabilities) if prob >= beta).strip()


def confident_sentence(pieces: Sequence[str], logprobs: Sequence[float], min_prob: float, question: str) -> str:
    """FLARE's masked query of the sentence, its tokens below ``min_prob`` left out."""
    return masked_query(pieces, [math.exp(lp) for lp in logprobs], min_prob) or question.strip()


def full_context(question: str, written: str) -> str:
    """The question and everything written before the trigger, on one line."""
    return " ".join(" ".join(part.split()) for part in (question, written) if part.strip())


def query_of(form: QueryForm, question: str, answer_so_far: str, pieces: Sequence[str], logprobs: Sequence[float],
             n_words: int, min_prob: float, unkept: str = "") -> str:
    """The query of ``form`` (any but ``qfs``, which reads attention) at a trigger; ``pieces`` and
    ``logprobs`` are the triggering sentence's tokens; ``unkept``, text written before the trigger
    that the cut dropped (the reference variant cuts at the sentence's start), counts as context."""
    if form == "previous_sentence":
        return previous_sentence(question, answer_so_far)
    if form == "last_words":
        return last_words(question, answer_so_far, n_words)
    if form == "confident_sentence":
        return confident_sentence(pieces, logprobs, min_prob, question)
    if form == "full_context":
        return full_context(question, answer_so_far + unkept)
    raise ValueError(f"query form {form!r} is not one of {', '.join(QUERY_FORMS[1:])}")
