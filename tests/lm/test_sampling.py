"""Sampled decoding in the HF backend: reproducible from a seed, greedy untouched, nucleus cut."""

import pytest
import torch

from dynrag.lm.batching import BatchingLM
from dynrag.lm.hf import HFLanguageModel
from dynrag.lm.row_decode import Sampling, nucleus
from tests.tiny_models import tiny_llama, tiny_tokenizer

TOK = tiny_tokenizer()
PROMPT = "the bridge of the town was built in 1887 by the engineer who was born in"


def model(draft_tokens: int = 0) -> HFLanguageModel:
    return HFLanguageModel(tiny_llama(len(TOK), seed=3), TOK, name="tiny", draft_tokens=draft_tokens)


def test_a_seed_gives_the_same_tokens_and_greedy_stays_greedy():
    lm = model()
    greedy = lm.generate(PROMPT, 10).token_ids
    first = lm.generate(PROMPT, 10, sampling=Sampling(1.5, 1.0, seed=7)).token_ids
    assert lm.generate(PROMPT, 10, sampling=Sampling(1.5, 1.0, seed=7)).token_ids == first
    assert lm.generate(PROMPT, 10, sampling=Sampling(1.5, 1.0, seed=8)).token_ids != first
    assert lm.generate(PROMPT, 10, sampling=Sampling(0.0, 1.0, seed=7)).token_ids == greedy  # temperature 0: greedy
    assert lm.generate(PROMPT, 10).token_ids == greedy  # sampling left nothing behind
    # Prompt-lookup drafts change how tokens are fed, not which are drawn.
    assert model(draft_tokens=4).generate(PROMPT, 10, sampling=Sampling(1.5, 1.0, seed=7)).token_ids == first


def test_sampled_block_seeds_each_call_in_turn():
    lm = model()
    with lm.sampled(Sampling(1.0, 0.9, seed=1)):
        a = [lm.generate(PROMPT, 6).token_ids for _ in range(3)]
    with lm.sampled(Sampling(1.0, 0.9, seed=1)):
        b = [lm.generate(PROMPT, 6).token_ids for _ in range(3)]
    assert a == b and len({tuple(x) for x in a}) > 1  # the same sequence of calls; calls differ from each other
    assert lm.sampling is None
    assert a[0] == lm.generate(PROMPT, 6, sampling=Sampling(1.0, 0.9, Sampling(1.0, 0.9, 1).call_seed(0))).token_ids


def test_nucleus_keeps_the_smallest_set_reaching_top_p():
    probs = torch.tensor([0.1, 0.5, 0.3, 0.1])
    assert nucleus(probs, 0.7).tolist() == pytest.approx([0.0, 0.625, 0.375, 0.0])  # 0.5 + 0.3 reach 0.7
    assert nucleus(probs, 0.5).tolist() == pytest.approx([0.0, 1.0, 0.0, 0.0])
    assert nucleus(probs, 1.0) is probs
    with pytest.raises(ValueError):
        Sampling(1.0, 0.0)


def test_the_batching_engine_refuses_sampled_rows():
    base = model()
    lm = BatchingLM(base, max_rows=2)
    try:
        with base.sampled(Sampling(1.0, 1.0, 0)), pytest.raises(RuntimeError, match="greedily"):
            lm.generate(PROMPT, 4)
    finally:
        lm.close()
