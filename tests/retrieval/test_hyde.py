"""HyDE: the hypothetical passage is written by the model and appended to the question."""

import pytest

from dynrag.retrieval.hyde import HYDE_PROMPT, hypothetical_passage, join_query
from tests.tiny_models import tiny_llama_lm

QUESTION = "who built the bridge ?"


@pytest.fixture(scope="module")
def lm():
    return tiny_llama_lm(seed=1)


def test_the_hypothetical_passage_is_what_the_model_writes_after_the_prompt(lm):
    expected = lm.generate(HYDE_PROMPT.format(question=QUESTION), 12, stop=("\n",)).text
    passage, decoded = hypothetical_passage(lm, QUESTION, max_new_tokens=12)
    assert passage == " ".join(expected.split()) and 1 <= decoded <= 12
    query = join_query(QUESTION, passage)
    assert query.startswith(QUESTION) and query == f"{QUESTION} {passage}".strip()


def test_join_query_without_a_passage_is_the_question():
    assert join_query("  who built it? ", "") == "who built it?"
