"""Whether an answer writes a chain of reasoning that a trigger could interrupt (pure functions).

FLARE and DRAGIN exist for the moment a reader, writing one fact per sentence, reaches a fact it does
not know. These figures say whether that moment came: how many reasoning sentences an answer wrote,
whether a multi-hop answer wrote at least one sentence per hop, and how many retrievals fired after
the first sentence was written (a retrieval before it is a retrieval on the question alone).

- Reasoning sentences are the sentences before the last "the answer is" (any case; the exemplars'
  phrase is "So the answer is"). An answer without the phrase is taken to end in its answer: its
  last sentence is not counted (the short answer style writes only the answer).
- A question's hops are the world's hops, else the gold decomposition's sub-questions, else its
  distinct gold supporting passages; none of these: unknown.
- A retrieval's position is the number of answer tokens kept when it fired (methods/base.py); the
  first sentence is complete at the end of the first generation step whose kept text ends one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from dynrag.text.sentences import split_sentences

_ANSWER_PHRASE = re.compile(r"the answer is", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?:[\"'\u201d\u2019)\]]*)(?:\s|$)")


def reasoning_sentences(text: str) -> int:
    """How many sentences of ``text`` come before its answer."""
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if phrases:  # "So" or "Thus" before the phrase opens the answer's sentence: not a sentence of its own
        return sum(1 for s in split_sentences(text[: phrases[-1].start()]) if _SENTENCE_END.search(s + " "))
    return max(0, len(split_sentences(text)) - 1)


def hop_count(hops: Sequence[Any], decomposition: Sequence[str], supporting: Sequence[str]) -> int | None:
    """A question's hops from what its dataset gives (see the module doc); None when unknown."""
    for source in (hops, decomposition, list(dict.fromkeys(supporting))):
        if source:
            return len(source)
    return None


def first_sentence_tokens(steps: Sequence[Mapping[str, Any]]) -> int | None:
    """Kept answer tokens once the first sentence is complete (at a step's end); None: never."""
    kept_text, kept = "", 0
    for step in steps:
        kept_text += str(step.get("kept_text") or "")
        kept += int(step.get("kept_tokens") or 0)
        if _SENTENCE_END.search(kept_text.strip() + " "):
            return kept
    return None


def retrievals_after_first_sentence(steps: Sequence[Mapping[str, Any]], positions: Sequence[int]) -> int:
    """How many retrievals (by kept-token position) fired once the first sentence was written."""
    done_at = first_sentence_tokens(steps)
    if done_at is None:
        return 0
    return sum(1 for p in positions if p >= done_at)


def chain_fields(answer: Mapping[str, Any], hops: int | None) -> dict[str, Any]:
    """The prediction record's chain figures for one answer dict (``Answer.to_dict()``)."""
    positions = [int(r.get("position") or 0) for r in answer.get("retrievals") or []]
    return {
        "reasoning_sentences": reasoning_sentences(str(answer.get("answer") or "")),
        "hop_count": hops,
        "retrievals_after_first_sentence": retrievals_after_first_sentence(answer.get("steps") or [], positions),
    }


def chain_summary(records: Sequence[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """Means over the records that carry the figures (older records do not): sentences an answer,
    the share of multi-hop answers with a sentence per hop, retrievals after the first sentence."""
    rows = [r for r in records if "reasoning_sentences" in r]
    multi = [r for r in rows if (r.get("hop_count") or 0) >= 2]
    return {
        "reasoning_sentences_per_answer": sum(r["reasoning_sentences"] for r in rows) / len(rows) if rows else None,
        "multi_hop_answers": len(multi),
        "sentence_per_hop_share": (sum(r["reasoning_sentences"] >= r["hop_count"] for r in multi) / len(multi)
                                   if multi else None),
        "retrievals_after_first_sentence_per_question": (
            sum(r["retrievals_after_first_sentence"] for r in rows) / len(rows) if rows else None),
    }
