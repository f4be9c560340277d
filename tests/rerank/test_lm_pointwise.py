"""LM-pointwise reranking: P(yes) / (P(yes) + P(no)) from one forward pass per passage."""

import math

import numpy as np
import pytest
import torch

from dynrag.errors import ConfigError
from dynrag.rerank.lm_pointwise import RELEVANCE_PROMPT, LMPointwiseReranker, yes_probability
from dynrag.retrieval.base import Hit
from tests.tiny_models import tiny_llama_lm

# The tiny vocabulary has no "yes"/"no": two of its words stand in for them.
YES, NO = (" north",), (" south",)


@pytest.fixture(scope="module")
def lm():
    return tiny_llama_lm(seed=7)


HITS = [
    Hit("a", "", "the river flows south through lyon", 3.0),
    Hit("b", "", "the old bridge was built in 1887 by an engineer", 2.0),
    Hit("c", "", "the museum of the harbour town", 1.0),
]


def test_yes_probability_normalises_over_the_two_answers():
    logprobs = np.log([0.2, 0.1, 0.3, 0.1])  # yes, Yes, no, No
    assert yes_probability(logprobs, 2) == pytest.approx(0.3 / 0.7)
    assert yes_probability(np.log([0.6, 0.2]), 1) == pytest.approx(0.75)


def by_hand(lm, question, hit):
    prompt = RELEVANCE_PROMPT.format(passage=hit.text, question=question)
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([lm.tokenizer(prompt).input_ids])).logits[0, -1]
    p = torch.softmax(logits.float(), -1)
    y, n = float(p[lm.first_token_id(YES[0])]), float(p[lm.first_token_id(NO[0])])
    return y / (y + n)


def test_scores_and_order_match_a_hand_computed_forward_pass(lm):
    reranker = LMPointwiseReranker(lm, yes=YES, no=NO)
    question = "who built the bridge ?"
    expected = [by_hand(lm, question, h) for h in HITS]
    out = reranker.rerank(question, HITS, top_k=2)
    order = sorted(range(3), key=lambda i: -expected[i])[:2]
    assert [h.id for h in out] == [HITS[i].id for i in order]
    for h, i in zip(out, order):
        assert math.isclose(h.score, expected[i], rel_tol=1e-4)


def test_long_passages_are_cut_to_max_passage_words(lm):
    reranker = LMPointwiseReranker(lm, yes=YES, no=NO, max_passage_words=3)
    assert "Passage: the river flows\n" in reranker.prompt("q", HITS[0])


def test_yes_and_no_must_differ_in_their_first_token(lm):
    with pytest.raises(ConfigError, match="shared first token"):
        LMPointwiseReranker(lm, yes=(" north",), no=(" north",))


def test_a_model_without_next_token_probabilities_is_refused():
    class HttpModel:
        name = "openai:http://x#m"

    with pytest.raises(ConfigError, match="rerank=embedding"):
        LMPointwiseReranker(HttpModel())
