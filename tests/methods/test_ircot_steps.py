"""IRCoT's step query and paragraph set, both variants (pure functions)."""

from dynrag.methods.ircot.steps import (
    add_paragraphs,
    is_reasoning,
    says_answer,
    step_query,
    without_question_words,
)
from dynrag.retrieval.base import Hit

QUESTION = "Who is the director of Dunkirk?"


def hit(pid, text=None, title=None):
    return Hit(pid, title if title is not None else f"title {pid}", text if text is not None else f"text of {pid}", 1.0)


def test_the_stop_rule_and_what_counts_as_a_reasoning_sentence():
    assert says_answer("So the answer is Paris.") and says_answer("The ANSWER IS no.")
    assert not says_answer("The answer: Paris.")
    for sentence in ("Thus, Nolan is British.", "So the answer is X.", "Therefore he won.", "Hence the date.",
                     "That is, he won.", "He was 1,200 + 20 = 1,220 days old."):
        assert is_reasoning(sentence), sentence
    for sentence in ("Sofia is a city.", "Thusnelda was a princess.", "There were 3 + 4 apples.", "So-called art."):
        assert not is_reasoning(sentence), sentence


def test_paper_queries_the_last_sentence_and_reference_the_last_factual_one_without_question_words():
    written = ["Dunkirk was directed by Christopher Nolan.", "Thus, the director is Nolan."]
    assert step_query(QUESTION, [], "paper") == QUESTION
    assert step_query(QUESTION, written, "paper") == "Thus, the director is Nolan."
    assert step_query(QUESTION, written, "reference") == "Dunkirk was directed by Christopher Nolan."
    # no factual sentence yet: the question, its question words taken out (compared whole: "Who" and "is")
    assert step_query(QUESTION, written[1:], "reference") == "the director of Dunkirk?"
    assert without_question_words("How does IS work? what") == "work?"


def test_paragraphs_accumulate_new_ones_only_up_to_the_budget():
    held = [hit("a"), hit("b")]
    added = add_paragraphs(held, [hit("b"), hit("c"), hit("d"), hit("e")], budget=4, variant="paper")
    assert [h.id for h in added] == ["c", "d"]  # b is held already; the budget of 4 leaves room for 2
    assert add_paragraphs([*held, *added], [hit("f")], budget=4, variant="paper") == []


def test_reference_skips_long_and_near_repeated_paragraphs_and_shows_350_words():
    held = [hit("a", text="the bridge was built in 1887 by a local engineer", title="Old Bridge")]
    near = hit("a2", text="the bridge was built in 1887 by a local engineer.", title="Old Bridge")
    long = hit("l", text=" ".join(["word"] * 601))
    shown = hit("s", text=" ".join(f"w{i}" for i in range(400)))
    added = add_paragraphs(held, [near, long, shown], budget=15, variant="reference")
    assert [h.id for h in added] == ["s"] and len(added[0].text.split()) == 350
    # the paper variant keeps them all, whole
    assert [h.id for h in add_paragraphs(held, [near, long, shown], budget=15, variant="paper")] == ["a2", "l", "s"]
    # a like text under another title is no repeat
    assert [h.id for h in add_paragraphs(held, [hit("n", text=near.text, title="River")], 15, "reference")] == ["n"]
