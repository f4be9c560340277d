"""English stopwords and the content-word test used by DRAGIN's semantic indicator ``s_i``.

The set is bm25s's two English lists (the short Lucene list and the longer NLTK-style list) plus the
pieces that tokenizers split contractions into and a handful of common function words neither list
has. spaCy is deliberately not a dependency: the paper used spaCy's list, but a fixed set keeps
scoring deterministic and install-free, and the differences are confined to rare function words.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Any

# Contraction tails as tokenizers emit them once the word is split ("is" + "n't", "Quist" + "'s").
_CONTRACTION_PIECES = frozenset(
    {"'s", "'re", "'ve", "'ll", "'d", "'m", "'t", "n't", "s", "t", "d", "m", "ll", "re", "ve", "nt"}
)

# Function words that carry no retrievable meaning but are missing from bm25s's lists; without them
# modal verbs and connectives would count as content and could trigger retrieval on their own.
_EXTRA = frozenset(
    {
        "also", "although", "among", "amongst", "another", "anyone", "anything", "became", "become",
        "becomes", "besides", "beyond", "could", "either", "else", "ever", "every", "everything",
        "however", "indeed", "instead", "may", "might", "much", "must", "neither", "nevertheless",
        "one's", "otherwise", "per", "perhaps", "rather", "shall", "since", "still", "therefore",
        "though", "thus", "toward", "towards", "unless", "upon", "us", "whatever", "whenever",
        "whereas", "whether", "whose", "within", "without", "would", "yet", "etc",
    }
)


@cache
def stopwords() -> frozenset[str]:
    """Lower-case English stopwords (bm25s lists + contraction pieces + extra function words).

    Built on first use: importing bm25s loads numba, which costs a command's start-up a third of a
    second when it never scores a word."""
    import bm25s.stopwords as lists

    words: set[str] = set()
    for name in ("STOPWORDS_EN", "STOPWORDS_EN_PLUS"):  # older bm25s releases ship only the first
        words.update(w.lower() for w in getattr(lists, name, ()))
    return frozenset(words) | _CONTRACTION_PIECES | _EXTRA


def __getattr__(name: str) -> Any:
    if name == "STOPWORDS_EN":  # the set as a module constant, built on first access
        return stopwords()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _normalise_apostrophes(word: str) -> str:
    # Curly apostrophes would otherwise hide "’s" and "don’t" from the ASCII stopword entries.
    return word.replace("\u2019", "'").replace("\u2018", "'")


def _is_edge_char(ch: str) -> bool:
    # Unicode categories P* (punctuation) and S* (symbols) cover ASCII punctuation as well as
    # typographic quotes, dashes and ellipses, so no hand-made list can miss one.
    return ch.isspace() or unicodedata.category(ch)[0] in "PS"


def strip_punctuation(word: str) -> str:
    """``word`` without surrounding punctuation and whitespace (inner characters are kept)."""
    start, end = 0, len(word)
    while start < end and _is_edge_char(word[start]):
        start += 1
    while end > start and _is_edge_char(word[end - 1]):
        end -= 1
    return word[start:end]


def is_content_word(word: str) -> bool:
    """True when ``word`` carries meaning: ``s_i = 0`` for stopwords, punctuation and blanks, else 1.

    The word is stripped of surrounding punctuation ("Paris." -> "Paris") and compared
    case-insensitively with ``stopwords()``. Numbers ("1887", "3.5") count as content.
    """
    core = strip_punctuation(_normalise_apostrophes(word))
    if not core:
        return False
    lowered = core.lower()
    stop = stopwords()
    if lowered in stop:
        return False
    # "don't" / "Quist's" reach here whole; a stopword followed by a contraction tail ("it's",
    # "they're") is still a stopword, but a name with a possessive ("Quist's") is content.
    for tail in ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m"):
        if lowered.endswith(tail) and len(lowered) > len(tail):
            head = lowered[: -len(tail)]
            if head in stop or (tail == "n't" and head + "n" in stop):
                return False
    return True


__all__ = ["STOPWORDS_EN", "is_content_word", "stopwords", "strip_punctuation"]
