"""IRCoT end to end on a scripted model: each sentence is the next query, paragraphs accumulate up to
the budget, and the chain stops at "answer is" or after max_steps sentences."""

from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_traits
from tests.methods.sentence_lm import NamedPassages, SentenceLM

QUESTION = "What is the nationality of the director of Dunkirk?"
FIRST = "Dunkirk was directed by Christopher Nolan."
SECOND = " Christopher Nolan is British."
THIRD = " So the answer is British."
RANKINGS = {QUESTION: ["p1", "p2", "p3"], FIRST: ["p3", "p4", "p5"], SECOND.strip(): ["p6", "p7", "p8"]}


def run(turns, rankings=RANKINGS, **options):
    lm = SentenceLM(turns)
    retriever = NamedPassages(rankings, default=["p9"])
    method = build_method("ircot", lm, retriever, options, PromptBuilder.for_dataset("default", 1))
    return method.answer(QUESTION), lm, retriever


def test_each_sentence_is_the_next_query_and_the_answer_sentence_ends_the_chain():
    result, lm, retriever = run([FIRST, SECOND, THIRD])
    assert retriever.queries == [QUESTION, FIRST, SECOND.strip()]  # none after the answer sentence
    assert result.final_answer == "British" and result.text == FIRST + SECOND + THIRD
    assert [s.kind for s in result.trace.steps] == ["generate"] * 3
    # paragraphs accumulate: the first sentence is written with the question's, the last with all six
    assert "about p1" in lm.documents(0) and "about p4" not in lm.documents(0)
    assert all(f"about p{i}" in lm.documents(2) for i in range(1, 9) if i != 9)
    assert lm.documents(2).count("about p3") == 1  # found twice, held once
    assert not method_traits("ircot").needs_attention


def test_the_paragraph_budget_caps_the_set_and_each_retrieval_says_what_it_added():
    result, lm, _ = run([FIRST, SECOND, THIRD], max_paragraphs=4)
    assert [r.reason.split("; ", 1)[1] for r in result.trace.retrievals] == [
        "3 new, 3 held (budget 4)", "1 new, 4 held (budget 4)", "0 new, 4 held (budget 4)"]
    assert "about p4" in lm.documents(2) and "about p5" not in lm.documents(2)


def test_max_steps_stops_a_chain_that_never_answers():
    facts = ["Fact one is here.", " Fact two is here.", " Fact three is here.", " Fact four is here."]
    result, _, retriever = run([*facts, " So the answer is none."], max_steps=3)
    assert retriever.queries == [QUESTION, "Fact one is here.", "Fact two is here."]
    assert [s.kind for s in result.trace.steps] == ["generate"] * 3 + ["finish"]
    assert len(result.trace.retrievals) == 3


def test_reference_searches_with_the_last_factual_sentence_without_question_words():
    turns = [FIRST, " Thus, Nolan directed it.", THIRD]
    _, _, retriever = run(turns, variant="reference")
    # "What" and "is" go; the conclusion is passed over for the sentence before it
    assert retriever.queries == ["the nationality of the director of Dunkirk?", FIRST, FIRST]
    _, _, retriever = run(turns)
    assert retriever.queries == [QUESTION, FIRST, "Thus, Nolan directed it."]


def test_reread_answers_again_over_every_gathered_paragraph():
    result, lm, _ = run([FIRST, SECOND, THIRD, "Nolan is British, so the answer is British."], reader="reread")
    assert [s.kind for s in result.trace.steps] == ["generate"] * 3 + ["read"]
    assert lm.prompts[3].text.rstrip().endswith("Answer:")  # a fresh answer, not the chain's continuation
    assert all(f"about p{i}" in lm.documents(3) for i in range(1, 9))
    assert result.text == "Nolan is British, so the answer is British." and result.final_answer == "British"


def test_the_default_tune_space_is_the_papers_paragraphs_per_retrieval():
    from dynrag.methods.ircot import Ircot
    from dynrag.tune.space import parse_param

    (k,) = [parse_param(spec, Ircot.Options, None, "ircot", None) for spec in Ircot.traits.tune_space]
    assert (k.name, k.grid()) == ("k", [2, 4, 6, 8])
