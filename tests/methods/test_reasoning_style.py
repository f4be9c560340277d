"""What a chat reader is asked to write before its answer: a chain (default) or brief reasoning."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, parse_options
from tests.fakes import FakeRetriever, ScriptedLM


def test_chat_readers_are_asked_for_one_sentence_a_fact_unless_brief():
    builder = PromptBuilder.for_dataset("hotpotqa")
    chain = builder.instruction_text(chat=True)
    assert "one short sentence for each fact you need, as many as the question needs" in chain
    assert "at most two short sentences" not in chain
    brief = builder.with_reasoning("brief").instruction_text(chat=True)
    assert "at most two short sentences" in brief and "So the answer is" in brief
    # plain readers read the exemplars, which already write one sentence a fact
    assert builder.with_reasoning("brief").instruction_text() == builder.instruction_text()
    assert builder.with_reasoning("chain") is builder


@pytest.mark.parametrize("method", ["direct", "single", "flare", "fixed_sentence"])
def test_the_reasoning_option_reaches_the_builder(method):
    lm = ScriptedLM(lambda prompt: "So the answer is Cork.")
    answering = build_method(method, lm, FakeRetriever(rankings={}), {"reasoning": "brief"},
                             PromptBuilder.for_dataset("default"))
    builder = answering.options.builder_for(answering.builder) if method in ("direct", "single") else answering.builder
    assert builder.reasoning == "brief"
    assert answering.answer("Where was the founder of Acme born?").final_answer == "Cork"


def test_deeprag_writes_its_own_narrative_and_refuses_the_option():
    assert parse_options("single", {"reasoning": "brief"}).reasoning == "brief"
    with pytest.raises(ConfigError, match="reasoning"):
        parse_options("deeprag", {"reasoning": "brief"})
    with pytest.raises(ConfigError, match="reasoning"):
        parse_options("flare", {"reasoning": "long"})
