"""IRCoT's pure pieces: the query of each step and the growing set of paragraphs (Trivedi et al., ACL 2023).

Two readings, the ``variant`` option:

* ``paper``: the query is the last generated reasoning sentence (the question before the first);
  new paragraphs join the set unless already held (same id), until the set holds the budget.
* ``reference``: as the authors' released code (StonyBrookNLP/ircot) does it, read and written
  here anew: the query is the last generated sentence that is not a *reasoning* sentence (one that
  opens with thus, so, therefore, hence or "that is,", or works out a sum such as "3 + 4 = 7"),
  the question when there is none, with the words who, what, when, where, why, which, how, does
  and is taken out; a paragraph is skipped when it is over 600 words or when an already held one
  has a title and a text each at least 90% alike (a character-level similarity ratio, on the
  texts as shown); a held paragraph is shown cut to its first 350 words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Literal

from dynrag.retrieval.base import Hit

Variant = Literal["paper", "reference"]

ANSWER_MARK = re.compile(r"answer is", re.IGNORECASE)  # the paper's stop: a sentence that gives the answer
_REASONING_OPENER = re.compile(r"^\s*(?:(?:thus|so)\b[\s,]|therefore|hence|that is,)", re.IGNORECASE)
_ARITHMETIC = re.compile(r"\d[\d,]*(?:\.\d+)?\s*[-+]\s*\d[\d,]*(?:\.\d+)?\s*=\s*\d")
QUESTION_WORDS = frozenset({"who", "what", "when", "where", "why", "which", "how", "does", "is"})
LONG_PARAGRAPH_WORDS = 600  # reference: longer retrieved paragraphs are skipped
SHOWN_PARAGRAPH_WORDS = 350  # reference: a held paragraph is shown up to this many words
ALIKE_PERCENT = 90.0  # reference: title and text this similar to a held paragraph's make a repeat


def says_answer(sentence: str) -> bool:
    """The paper's stop rule: the sentence holds "answer is"."""
    return bool(ANSWER_MARK.search(sentence))


def is_reasoning(sentence: str) -> bool:
    """A sentence that states no new fact (a conclusion or a sum): the reference variant does not search with it."""
    return bool(_REASONING_OPENER.match(sentence) or _ARITHMETIC.search(sentence))


def without_question_words(text: str) -> str:
    """``text`` without the words the reference variant drops before a search (compared whole, any case)."""
    return " ".join(w for w in text.split(" ") if w.strip().lower() not in QUESTION_WORDS)


def step_query(question: str, sentences: Sequence[str], variant: Variant) -> str:
    """The query after ``sentences`` (the reasoning written so far, one sentence each)."""
    written = [s.strip() for s in sentences if s.strip()]
    if variant == "paper":
        return written[-1] if written else question.strip()
    factual = [s for s in written if not is_reasoning(s)]
    return without_question_words(factual[-1] if factual else question.strip())


def similarity(a: str, b: str) -> float:
    """Character-level similarity of two texts, 0-100 (difflib's ratio)."""
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    return 100.0 * matcher.ratio() if matcher.real_quick_ratio() * 100.0 >= ALIKE_PERCENT else 0.0


def _repeats(held: Sequence[Hit], hit: Hit) -> bool:
    return any(similarity(h.title, hit.title) >= ALIKE_PERCENT and similarity(h.text, hit.text) >= ALIKE_PERCENT
               for h in held)


def add_paragraphs(held: Sequence[Hit], found: Sequence[Hit], budget: int, variant: Variant) -> list[Hit]:
    """The paragraphs of ``found`` that join ``held`` (in their order), leaving the set at most ``budget``."""
    ids = {h.id for h in held}
    room = max(0, budget - len(held))
    added: list[Hit] = []
    for hit in found:
        if len(added) >= room:
            break
        if hit.id in ids:
            continue
        if variant == "reference":
            words = hit.text.split(" ")
            if len(words) > LONG_PARAGRAPH_WORDS:
                continue
            # Held paragraphs are kept as shown, so a new one is compared as it would be shown.
            hit = Hit(hit.id, hit.title, " ".join(words[:SHOWN_PARAGRAPH_WORDS]), hit.score)
            if _repeats([*held, *added], hit):
                continue
        ids.add(hit.id)
        added.append(hit)
    return added
