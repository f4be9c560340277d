"""Which words carry meaning: the stopword rule, or part-of-speech tags as DRAGIN's authors use.

DRAGIN's semantic indicator ``s_i`` (and the candidates its query is built from) keeps content words.
The paper describes a stopword filter; the authors' released code keeps words tagged NOUN, PROPN,
VERB, ADJ or NUM by spaCy's ``en_core_web_sm`` pipeline. That pipeline is not on PyPI, so the default
here is the stopword rule (:func:`dynrag.text.stopwords.is_content_word`); ``pos`` uses any spaCy
pipeline the user has installed (``content_words=pos``), or any callable that tags text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Literal

from dynrag.errors import ConfigError
from dynrag.text.stopwords import is_content_word

ContentRule = Literal["stopwords", "pos"]

# The authors' part-of-speech classes of a "real word" (universal tags).
CONTENT_POS = frozenset({"NOUN", "PROPN", "VERB", "ADJ", "NUM"})

# A tagger maps a text to (start char, end char, universal POS tag) per token.
Tagger = Callable[[str], list[tuple[int, int, str]]]


@lru_cache(maxsize=4)
def spacy_tagger(model: str = "en_core_web_sm") -> Tagger:
    """A tagger from an installed spaCy pipeline; a clear error when spaCy or the pipeline is missing."""
    try:
        import spacy
    except ImportError:
        raise ConfigError(
            "content_words=pos needs spaCy and an English pipeline with a tagger (the authors used "
            f"{model!r}, which is not on PyPI: install it from spaCy's releases), or content_words=stopwords"
        ) from None
    try:
        nlp = spacy.load(model, disable=["parser", "ner", "lemmatizer"])
    except OSError:
        raise ConfigError(
            f"content_words=pos: spaCy pipeline {model!r} is not installed; install it, name another "
            "with pos_model=NAME, or use content_words=stopwords"
        ) from None

    def tag(text: str) -> list[tuple[int, int, str]]:
        return [(t.idx, t.idx + len(t.text), t.pos_) for t in nlp(text)]

    return tag


def pos_content_flags(words: Sequence[str], tagger: Tagger) -> list[bool]:
    """True for each word overlapping a token tagged NOUN, PROPN, VERB, ADJ or NUM.

    The words are joined with spaces and tagged in one call (context helps the tagger). The
    released code instead asks whether any tagged word is a *substring* of the word, so a short
    content word ("ax") marks every word containing it; matching by character span avoids that.
    """
    text_parts, spans, pos = [], [], 0
    for w in words:
        spans.append((pos, pos + len(w)))
        text_parts.append(w)
        pos += len(w) + 1
    tags = tagger(" ".join(text_parts))
    flags = []
    for start, end in spans:
        flags.append(
            end > start and any(t_start < end and start < t_end and tag in CONTENT_POS for t_start, t_end, tag in tags)
        )
    return flags


def content_flags(words: Sequence[str], rule: ContentRule = "stopwords", tagger: Tagger | None = None) -> list[bool]:
    """The semantic indicator for each word under ``rule``; ``pos`` needs ``tagger``."""
    if rule == "stopwords":
        return [is_content_word(w) for w in words]
    if rule == "pos":
        if tagger is None:
            raise ValueError("content rule 'pos' needs a tagger")
        return pos_content_flags(words, tagger)
    raise ValueError(f"unknown content rule {rule!r}; choose stopwords or pos")


__all__ = ["CONTENT_POS", "ContentRule", "Tagger", "content_flags", "pos_content_flags", "spacy_tagger"]
