"""Content-word rules: the stopword list, and part-of-speech tags matched by character span."""

import pytest

from dynrag.errors import ConfigError
from dynrag.text.content import content_flags, pos_content_flags, spacy_tagger

# A stand-in tagger: splits on spaces and punctuation, tags from a table (the rule, not a tagger, is tested).
TAGS = {"Lyon": "PROPN", "bridge": "NOUN", "was": "AUX", "built": "VERB", "old": "ADJ", "1887": "NUM",
        "the": "DET", "very": "ADV", "ax": "NOUN", "relaxed": "VERB", ".": "PUNCT", "in": "ADP"}


def table_tagger(text):
    out, pos = [], 0
    for piece in text.replace(".", " . ").split():
        start = text.index(piece, pos)
        out.append((start, start + len(piece), TAGS.get(piece, "X")))
        pos = start + len(piece)
    return out


def test_pos_rule_keeps_nouns_proper_nouns_verbs_adjectives_numbers():
    words = ["the", "very", "old", "bridge", "was", "built", "in", "1887", "Lyon."]
    assert pos_content_flags(words, table_tagger) == [False, False, True, True, False, True, False, True, True]


def test_pos_rule_matches_by_span_not_substring():
    # The released code asks whether a tagged content word is a *substring* of the word, so "ax"
    # (a NOUN here) would make "max" (untagged) content too; here only a word's own tokens count.
    assert pos_content_flags(["ax", "max"], table_tagger) == [True, False]


def test_stopword_rule_and_errors():
    assert content_flags(["the", "bridge", "1887", "."]) == [False, True, True, False]
    with pytest.raises(ValueError, match="tagger"):
        content_flags(["x"], "pos")


def test_missing_spacy_pipeline_is_a_config_error_with_the_fix():
    with pytest.raises(ConfigError, match="content_words"):
        spacy_tagger("no_such_pipeline_xyz")
