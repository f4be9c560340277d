"""The short answer style (`answer=short` of direct and single): the answer alone, no reasoning,
the answer phrase opening it."""

import pytest

from dynrag.data import Exemplar
from dynrag.errors import ConfigError
from dynrag.lm.chat import ChatFrame
from dynrag.methods.answering import SHORT_ANSWER_TOKENS
from dynrag.methods.prompting import PromptBuilder, short_answer
from dynrag.methods.registry import build_method, parse_options
from dynrag.retrieval.base import Hit
from tests.fakes import FakeRetriever, ScriptedLM

EXEMPLAR = Exemplar(question="Where was the author of Dune born?",
                    reasoning="Dune was written by Frank Herbert, who was born in Tacoma.", answer="Tacoma")


def builder(**kw) -> PromptBuilder:
    return PromptBuilder("So the answer is", [EXEMPLAR], **kw)


@pytest.mark.parametrize("text, answer", [
    (" Paris", "Paris"),
    (" Paris.", "Paris"),
    ("Answer: Paris.\nQuestion: what next?", "Paris"),
    (" 1.5 metres", "1.5 metres"),
    (' "Rush"', "Rush"),
    ("It lies in France. So the answer is Paris.", "Paris"),  # it reasoned anyway
    ("Paris is the capital. It lies on the Seine.", "Paris is the capital"),
    ("", ""),
    ("  \n", ""),
])
def test_the_short_answer_of_a_generation(text, answer):
    assert short_answer(text, "So the answer is") == answer


def test_short_exemplars_show_the_answer_alone_and_the_instruction_asks_for_it():
    short = builder().answering_short()
    assert short.short and not builder().short  # a copy: the shared builder keeps its style
    assert short.examples_text() == ("Question: Where was the author of Dune born?\n"
                                     "Answer: So the answer is Tacoma.\n\n")
    assert "answer only" in short.instruction_text() and short.instruction_text() == short.instruction_text(chat=True)
    text = short.build("Who wrote Emma?", [Hit("d1", "Emma", "Emma is a novel by Jane Austen.", 1.0)]).text
    assert text.endswith("Question: Who wrote Emma?\nAnswer:") and "Frank Herbert" not in text


def test_a_short_chat_prompt_is_the_instruction_then_the_question_in_the_frame():
    frame = ChatFrame("<s>sys:", "</s><u>", "</u><a>")
    prompt = PromptBuilder("So the answer is", []).answering_short()._assemble(
        "Who wrote Emma?", None, "So the answer is", [], frame)
    assert prompt.text == ("<s>sys:" + builder().short_instruction + "</s><u>" + "Question: Who wrote Emma?</u><a>"
                           "So the answer is")


def scripted(reply: str) -> ScriptedLM:
    return ScriptedLM(lambda prompt: reply)


def test_direct_short_answers_in_one_generation_capped_at_a_short_answers_length():
    lm = scripted(" ".join(["Jane"] * 100))
    answer = build_method("direct", lm, None, {"answer": "short", "max_new_tokens": 128}, builder()).answer(
        "Who wrote Emma?")
    assert len(lm.prompts) == 1  # no second pass to finish an answer phrase
    assert lm.prompts[0].endswith("Question: Who wrote Emma?\nAnswer: So the answer is")  # the phrase opens it
    assert [s.kind for s in answer.trace.steps] == ["generate"]
    assert answer.final_answer == " ".join(["Jane"] * SHORT_ANSWER_TOKENS)
    assert answer.text == "So the answer is " + answer.final_answer


def test_single_short_reads_its_passages_and_returns_the_line():
    lm = scripted(" Jane Austen.\nQuestion: and then?")
    retriever = FakeRetriever([Hit("d1", "Emma", "Emma is a novel by Jane Austen.", 1.0)])
    answer = build_method("single", lm, retriever, {"answer": "short"}, builder()).answer("Who wrote Emma?")
    assert answer.final_answer == "Jane Austen" and answer.text == "So the answer is Jane Austen."
    assert "Emma is a novel by Jane Austen." in lm.prompts[0] and "Dune was written" not in lm.prompts[0]


def test_reasoned_stays_the_default_and_a_bad_style_names_the_choices():
    assert parse_options("single", {}).answer == "reasoned" and parse_options("direct", {}).answer == "reasoned"
    with pytest.raises(ConfigError, match="'reasoned' or 'short'"):
        parse_options("direct", {"answer": "brief"})
