"""The content-word test behind DRAGIN's semantic indicator s_i."""

import pytest

from dynrag.text.stopwords import STOPWORDS_EN, is_content_word, strip_punctuation


@pytest.mark.parametrize(
    "word",
    ["the", "The", "THE", "the.", "(of", "was,", "he", "which", "would",
     "'s", "n't", "it's", "don’t", "won't"],
)
def test_stopwords_are_not_content(word):
    assert not is_content_word(word)


@pytest.mark.parametrize("word", ["", " ", "\n", ".", ",", "—", "...", "“”", "()", "-"])
def test_punctuation_and_blanks_are_not_content(word):
    assert not is_content_word(word)


@pytest.mark.parametrize(
    "word",
    ["Paris", "Paris.", "engineer,", '"Quist\'s"', "1887", "1887.", "3.5", "Velmora", "café", "東京"],
)
def test_content_words(word):
    assert is_content_word(word)


def test_strip_punctuation_keeps_inner_characters():
    assert strip_punctuation('("Dr. Quist\'s"),') == "Dr. Quist's"
    assert strip_punctuation("—") == ""


def test_stopword_set_is_lower_case_and_includes_bm25s_list():
    import bm25s.stopwords

    assert all(w == w.lower() for w in STOPWORDS_EN)
    assert set(bm25s.stopwords.STOPWORDS_EN) <= STOPWORDS_EN
