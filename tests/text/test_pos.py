"""Part-of-speech tags: the tag mapping and word-class counts against hand-tagged text, and the real
tagger (Lingua::EN::Tagger, `make tagger`) on sentences whose tags are not in doubt."""

from __future__ import annotations

import subprocess

import pytest

from dynrag.errors import ConfigError
from dynrag.text.pos import LinguaTagger, WordClassCounts, count_word_classes, parse_tagged_line, penn_tag


def test_penn_tag_renames_the_taggers_own_names():
    assert [penn_tag(t) for t in ("det", "prps", "wps", "pp", "ppc", "nnp", "vbz")] == \
        ["DT", "PRP$", "WP$", ".", ",", "NNP", "VBZ"]


def test_parse_tagged_line():
    line = "<wp>Who</wp> <vbd>founded</vbd> <det>the</det> <nn>band</nn> <pp>?</pp>"
    assert parse_tagged_line(line) == [("Who", "WP"), ("founded", "VBD"), ("the", "DT"), ("band", "NN"), ("?", ".")]
    assert parse_tagged_line("") == []


def test_count_word_classes_by_hand():
    # "Which city and which river did he name after his mother?"
    tagged = [("Which", "WDT"), ("city", "NN"), ("and", "CC"), ("which", "WDT"), ("river", "NN"), ("did", "VBD"),
              ("he", "PRP"), ("name", "VB"), ("after", "IN"), ("his", "PRP$"), ("mother", "NN"), ("?", ".")]
    assert count_word_classes(tagged) == WordClassCounts(wh_words=2, nouns=3, verbs=2, conjunctions=1, pronouns=2)
    assert count_word_classes([]).as_dict() == {"wh_words": 0, "nouns": 0, "verbs": 0, "conjunctions": 0, "pronouns": 0}


def _tagger_installed() -> bool:
    try:
        return subprocess.run(["perl", "-MLingua::EN::Tagger", "-e", "1"], capture_output=True).returncode == 0
    except FileNotFoundError:
        return False


needs_tagger = pytest.mark.skipif(not _tagger_installed(), reason="Lingua::EN::Tagger is not installed (make tagger)")


@needs_tagger
def test_real_tagger_tags_a_question_and_keeps_text_order():
    texts = ["Who founded the band?", "", "It was his car and she drove it.", "Which city is bigger, Köln or Bonn?"]
    tagged = LinguaTagger().tag_texts(texts)
    assert len(tagged) == 4
    assert tagged[0] == [("Who", "WP"), ("founded", "VBD"), ("the", "DT"), ("band", "NN"), ("?", ".")]
    assert tagged[1] == []
    assert count_word_classes(tagged[2]) == WordClassCounts(wh_words=0, nouns=1, verbs=2, conjunctions=1, pronouns=4)
    assert ("Köln", "NNP") in tagged[3]  # text goes through as UTF-8


@needs_tagger
def test_real_tagger_keeps_one_result_per_text_when_a_text_holds_a_newline():
    tagged = LinguaTagger().tag_texts(["Where is\nParis?", "Who won?"])
    assert [w for w, _ in tagged[0]] == ["Where", "is", "Paris", "?"]
    assert [w for w, _ in tagged[1]] == ["Who", "won", "?"]


def test_missing_perl_is_a_one_line_error():
    with pytest.raises(ConfigError, match="liblingua-en-tagger-perl"):
        LinguaTagger(perl="no-such-perl-here").tag_texts(["Who won?"])
    assert LinguaTagger(perl="no-such-perl-here").tag_texts([]) == []
