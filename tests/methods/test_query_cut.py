"""max_query_tokens: every method's search query keeps its last N tokens (DRAGIN's released code
cuts every BM25 query, the baselines' too, to 64)."""

from dynrag.methods.chain import last_tokens
from dynrag.methods.registry import build_method
from dynrag.methods.prompting import PromptBuilder
from tests.fakes import ScriptedLM

QUESTION = "who built the old bridge of the town north of lyon ?"


def builder():
    return PromptBuilder.for_dataset("default", n_exemplars=1)


def test_fixed_length_queries_keep_their_last_tokens(lm, index):
    plain = build_method("fixed_length", lm, index, {"n": 12, "max_new_tokens": 24}, builder()).answer(QUESTION)
    cut = build_method("fixed_length", lm, index, {"n": 12, "max_new_tokens": 24, "max_query_tokens": 5},
                       builder()).answer(QUESTION)
    full = [r.query for r in plain.trace.retrievals]
    assert full and all(len(lm.encode(q)) > 5 for q in full), "the test needs queries over 5 tokens"
    expected = [lm.decode(lm.encode(q)[-5:]).strip() for q in full]
    assert [r.query for r in cut.trace.retrievals] == expected


def test_single_cuts_the_question_and_a_backend_without_a_tokenizer_keeps_the_last_words(index):
    lm = ScriptedLM(lambda text: " So the answer is Lyon.")
    answer = build_method("single", lm, index, {"max_query_tokens": 4}, builder()).answer(QUESTION)
    assert [r.query for r in answer.trace.retrievals] == ["north of lyon ?"]  # the last 4 words
    assert last_tokens(lm, "a b c", 4) == "a b c" and last_tokens(lm, "a b c", None) == "a b c"


def test_by_default_no_query_is_cut_except_dragin_reference(lm, index):
    assert build_method("flare", lm, index, {}, builder()).chain.max_query_tokens is None
    assert build_method("dragin", lm, index, {}, builder()).chain.max_query_tokens is None
    assert build_method("dragin", lm, index, {"variant": "reference"}, builder()).chain.max_query_tokens == 64
    assert build_method("dragin", lm, index, {"variant": "reference", "max_query_tokens": 9},
                        builder()).chain.max_query_tokens == 9
