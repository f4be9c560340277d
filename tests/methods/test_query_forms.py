"""DRAGIN's other query forms (Table 6), on hand-written text."""

import math

import pytest

from dynrag.methods.query_forms import (
    confident_sentence,
    full_context,
    last_words,
    previous_sentence,
    query_of,
)

QUESTION = "Where was the founder of Zorlak Mills born?"


def test_previous_sentence_skips_the_fragment_the_trigger_is_in():
    answer = "Zorlak Mills was founded by Ada Vell. Ada Vell was born in"
    assert previous_sentence(QUESTION, answer) == "Zorlak Mills was founded by Ada Vell."
    assert previous_sentence(QUESTION, "Zorlak Mills was founded by Ada Vell.") == "Zorlak Mills was founded by Ada Vell."
    assert previous_sentence(QUESTION, "Ada Vell was born in") == QUESTION  # no finished sentence yet


def test_last_words_reach_back_into_the_question():
    assert last_words(QUESTION, "It was Ada Vell", 5) == "born? It was Ada Vell"
    assert last_words(QUESTION, "", 3) == "Zorlak Mills born?"


def test_confident_sentence_drops_the_improbable_tokens():
    pieces = [" Ada", " Vell", " was", " born", " in", " Essenford", "."]
    probs = [0.9, 0.8, 0.95, 0.9, 0.9, 0.1, 0.99]
    assert confident_sentence(pieces, [math.log(p) for p in probs], 0.4, QUESTION) == "Ada Vell was born in."
    assert confident_sentence(pieces, [math.log(0.1)] * 7, 0.4, QUESTION) == QUESTION


def test_full_context_joins_question_and_text_on_one_line():
    assert full_context(QUESTION, "It was\nAda   Vell.") == QUESTION + " It was Ada Vell."


def test_query_of_dispatches_and_adds_the_dropped_text_to_the_full_context():
    args = (QUESTION, "Zorlak Mills was founded by Ada Vell.", [" Ada"], [0.0], 25, 0.4)
    assert query_of("previous_sentence", *args) == "Zorlak Mills was founded by Ada Vell."
    assert query_of("full_context", *args, unkept=" Ada Vell was born in") == (
        QUESTION + " Zorlak Mills was founded by Ada Vell. Ada Vell was born in")
    with pytest.raises(ValueError, match="qfs"):
        query_of("qfs", *args)
