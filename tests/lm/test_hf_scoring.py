"""next_token_logprobs and text_logprobs against a plain full forward pass of the same model."""

import numpy as np
import pytest
import torch

from dynrag.lm.hf import HFLanguageModel
from tests.tiny_models import tiny_gemma3, tiny_llama, tiny_tokenizer

TEXT = "the old bridge of the town was built in 1887 by an engineer"


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def lm(request):
    tok = tiny_tokenizer()
    build = tiny_llama if request.param == "llama" else tiny_gemma3
    return HFLanguageModel(build(len(tok), seed=3), tok, name=request.param)


def full_logprobs(lm, ids):
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1).numpy()


def test_next_token_logprobs_match_the_last_position_of_a_full_pass(lm):
    ids = lm.tokenizer(TEXT).input_ids
    expected = full_logprobs(lm, ids)[-1]
    got = lm.next_token_logprobs(TEXT, [" river", " town", " north"])
    want = [expected[lm.first_token_id(w)] for w in (" river", " town", " north")]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_next_token_logprobs_with_a_cached_prefix_match_a_full_pass(lm):
    from dynrag.lm.base import Prompt

    prompt = Prompt().add("shared", TEXT + " and the mill").mark_reusable_prefix().add("rest", " of the north river")
    expected = full_logprobs(lm, lm.tokenizer(prompt.text).input_ids)[-1]
    words = [" town", " school"]
    for _ in range(2):  # the second call reuses the cached prefix
        got = lm.next_token_logprobs(prompt, words)
        np.testing.assert_allclose(got, [expected[lm.first_token_id(w)] for w in words], atol=1e-5)


@pytest.mark.parametrize("chunk", [128, 3])
def test_text_logprobs_score_each_token_given_the_ones_before(lm, chunk):
    ids, offsets, logprobs = lm.text_logprobs(TEXT, chunk=chunk)
    assert ids == lm.tokenizer(TEXT).input_ids
    assert len(offsets) == len(ids) == len(logprobs)
    assert np.isnan(logprobs[0])  # the first token (BOS) has no context
    full = full_logprobs(lm, ids)
    want = [full[i - 1, ids[i]] for i in range(1, len(ids))]
    np.testing.assert_allclose(logprobs[1:], want, atol=1e-5)


def test_first_token_id_of_an_empty_string_is_an_error(lm):
    with pytest.raises(ValueError, match="no tokens"):
        lm.first_token_id("")
