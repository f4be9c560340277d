"""Compression: selection rules by hand, then each compressor with a real scoring model."""

import math

import numpy as np
import pytest
import torch

from dynrag.context.compress import (
    ExtractiveCompressor,
    SelectiveContextCompressor,
    context_text,
    mean_self_information,
    rebuild,
    select_ratio,
    select_within_budget,
    sentence_units,
)
from dynrag.errors import ConfigError
from dynrag.retrieval.base import Hit
from dynrag.retrieval.embedder import Embedder
from tests.tiny_models import tiny_llama_lm


def test_select_within_budget_by_hand():
    scores, words = [0.1, 0.9, 0.5, 0.7], [5, 10, 8, 4]
    # best first: #1 (10 words, total 10), #3 (4, total 14), #2 would make 22 > 15, #0 would make 19 > 15
    assert select_within_budget(scores, words, 15) == [1, 3]
    assert select_within_budget(scores, words, 19) == [0, 1, 3]  # #2 skipped, the smaller #0 still fits
    assert select_within_budget(scores, words, 5) == [1]  # the best unit is kept even over budget
    assert select_within_budget([], [], 5) == []
    with pytest.raises(ValueError):
        select_within_budget(scores, words, 0)


def test_select_ratio_by_hand():
    # 40 words in all; ratio 0.5 -> 20: take #1 (10), then #2 (20 more): 30 >= 20, stop.
    assert select_ratio([1.0, 3.0, 2.0], [10, 10, 20], 0.5) == [1, 2]
    assert select_ratio([1.0, 3.0, 2.0], [10, 10, 20], 0.25) == [1]
    assert select_ratio([1.0, 3.0, 2.0], [10, 10, 20], 1.0) == [0, 1, 2]
    with pytest.raises(ValueError):
        select_ratio([1.0], [3], 0.0)


def test_sentence_units_and_rebuild_keep_original_order():
    hits = [Hit("a", "A", "First one. Second one here. Third.", 1.0), Hit("b", "B", "Only sentence.", 0.5)]
    units = sentence_units(hits)
    assert [(u.hit, u.index, u.text) for u in units] == [
        (0, 0, "First one."), (0, 1, "Second one here."), (0, 2, "Third."), (1, 0, "Only sentence."),
    ]
    for u in units:
        assert hits[u.hit].text[u.start : u.end] == u.text
    assert units[1].words == 3
    out = rebuild(hits, units, [2, 0])
    assert [(h.id, h.title, h.text, h.score) for h in out] == [("a", "A", "First one. Third.", 1.0)]


def test_mean_self_information_by_hand():
    offsets = [(0, 0), (0, 3), (4, 7), (8, 11)]  # a special first token, then three words
    logprobs = [math.nan, -1.0, -2.0, -4.0]
    got = mean_self_information(offsets, logprobs, [(0, 7), (8, 11), (12, 15)])
    np.testing.assert_allclose(got, [1.5, 4.0, np.inf])


def test_context_text_marks_where_each_hit_starts():
    text, starts = context_text([Hit("a", "T", "abc", 0), Hit("b", "", "de", 0)])
    assert text == "T: abc\nde\n" and starts == [3, 7]


@pytest.fixture(scope="module")
def embedder():
    return Embedder.load()


HITS = [
    Hit("paris", "Paris", "Paris is the capital of France. The Eiffel Tower was completed in 1889. "
        "The city has many bakeries.", 3.0),
    Hit("cake", "Sponge cake", "Beat the eggs with sugar. Fold in the flour gently.", 2.0),
]


def test_extractive_keeps_the_sentences_closest_to_the_question(embedder):
    compressor = ExtractiveCompressor(embedder, budget=12)
    out, details = compressor.compress("When was the Eiffel Tower completed?", HITS)
    assert [h.id for h in out] == ["paris"]
    assert "The Eiffel Tower was completed in 1889." in out[0].text
    assert sum(len(h.text.split()) for h in out) <= 12
    assert details["dropped_passages"] == ["cake"] and details["words_after"] <= 12
    assert details["words_before"] == sum(len(h.text.split()) for h in HITS)


def test_extractive_keeps_order_within_a_passage(embedder):
    out, _ = ExtractiveCompressor(embedder, budget=1000).compress("Eiffel Tower", HITS)
    assert [h.text for h in out] == [h.text for h in HITS]  # a budget over everything keeps everything


def test_extractive_scores_are_cosines_of_the_embedder(embedder):
    question = "What is the capital of France?"
    units = sentence_units(HITS)
    vectors = embedder.encode([question] + [u.text for u in units])
    best = int(np.argmax(vectors[1:] @ vectors[0]))
    out, _ = ExtractiveCompressor(embedder, budget=1).compress(question, HITS)
    assert [h.text for h in out] == [units[best].text]


def test_bad_budgets_are_config_errors(embedder):
    with pytest.raises(ConfigError):
        ExtractiveCompressor(embedder, budget=0)


@pytest.fixture(scope="module")
def lm():
    return tiny_llama_lm(seed=11)


TINY_HITS = [
    Hit("a", "", "The bridge was built in 1887. The river flows south. The old mill is north.", 1.0),
    Hit("b", "", "The museum opened in the new year. The school is west of the harbour.", 0.5),
]


def test_selective_context_keeps_the_most_informative_sentences_under_the_lm(lm):
    out, details = SelectiveContextCompressor(lm, ratio=0.5).compress("ignored", TINY_HITS)
    # By hand: one full forward pass over the context, mean -log p per sentence, best first to half the words.
    text, starts = context_text(TINY_HITS)
    ids = lm.tokenizer(text, return_offsets_mapping=True)
    with torch.inference_mode():
        logp = torch.log_softmax(lm.model(input_ids=torch.tensor([ids.input_ids])).logits[0].float(), -1)
    token_lp = [math.nan] + [float(logp[i - 1, ids.input_ids[i]]) for i in range(1, len(ids.input_ids))]
    units = sentence_units(TINY_HITS)
    spans = [(starts[u.hit] + u.start, starts[u.hit] + u.end) for u in units]
    scores = mean_self_information(ids.offset_mapping, token_lp, spans)
    kept = select_ratio(scores, [u.words for u in units], 0.5)
    assert [h.text for h in out] == [h.text for h in rebuild(TINY_HITS, units, kept)]
    assert details["sentences_before"] == 5 and details["sentences_after"] == len(kept)
    assert details["words_after"] >= 0.5 * details["words_before"]


def test_selective_context_needs_token_logprobs():
    class HttpModel:
        name = "openai:x"

    with pytest.raises(ConfigError, match="compress=extractive"):
        SelectiveContextCompressor(HttpModel())


def test_compressors_pass_empty_lists_through(embedder, lm):
    assert ExtractiveCompressor(embedder).compress("q", [])[0] == []
    assert SelectiveContextCompressor(lm).compress("q", [])[0] == []
