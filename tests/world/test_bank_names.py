"""The real-fact bank and the fictional-name generator."""

from __future__ import annotations

from dynrag.text.stopwords import stopwords
from dynrag.world.bank import BANK, BY_ID, COUNTRIES, held_out_question, mention, phrasings
from dynrag.world.names import COMMON_WORDS, NameMaker, reserved_words
from dynrag.world.probe import EXEMPLARS


def test_the_bank_holds_over_150_facts_each_with_three_distinct_phrasings_and_a_fourth_held_out():
    assert len(BANK) >= 150
    assert len(BY_ID) == len(BANK)  # ids are unique
    for fact in BANK:
        asked = phrasings(fact)
        assert len(set(asked)) == 3, fact.id
        assert held_out_question(fact) not in asked, fact.id
        assert all(mention(fact.subject).lower() in q.lower() for q in asked)


def test_hand_checked_facts():
    assert BY_ID["real:capital:Australia"].answers == ("Canberra",)
    assert BY_ID["real:capital:Brazil"].answers == ("Brasília", "Brasilia")
    assert BY_ID["real:capital:Turkey"].answer == "Ankara"
    assert BY_ID["real:author:Moby-Dick"].answers == ("Herman Melville", "Melville")
    assert BY_ID["real:symbol:iron"].answer == "Fe"
    assert "real:continent:Turkey" not in BY_ID  # spans two continents: left out of the bank
    assert phrasings(BY_ID["real:symbol:tin"])[2] == "Tin has which chemical symbol?"
    assert held_out_question(BY_ID["real:capital:Netherlands"]) == "Name the capital city of the Netherlands."


def test_no_worked_example_subject_is_in_the_bank():
    subjects = {f.subject.lower() for f in BANK}
    for question, _ in EXEMPLARS:
        for word in ("japan", "kenya", "gold", "the raven", "baghdad"):
            if word in question.lower():
                assert word not in subjects


def test_every_country_has_a_capital():
    assert all(f"real:capital:{c}" in BY_ID for c in COUNTRIES)


def test_names_are_seeded_unique_and_never_a_reserved_word():
    a, b = NameMaker("s1"), NameMaker("s1")
    words = [a.word() for _ in range(300)]
    assert words == [b.word() for _ in range(300)]
    assert len(set(words)) == 300
    assert words != [NameMaker("s2").word() for _ in range(300)]
    reserved = reserved_words()
    assert not {w.lower() for w in words} & reserved


def test_reserved_words_hold_stopwords_common_words_and_the_banks_words():
    reserved = reserved_words()
    assert stopwords() <= reserved and COMMON_WORDS <= reserved
    assert {"canberra", "melville", "france", "peso"} <= reserved


def test_a_reserved_word_is_refused():
    first = NameMaker("x", reserved=frozenset()).word()
    assert NameMaker("x", reserved=frozenset({first.lower()})).word() != first
