"""Attention capture and per-token records of HFLanguageModel on tiny random Llama and Gemma 3."""

import numpy as np
import pytest
import torch

from dynrag.lm.base import Prompt
from dynrag.lm.hf import HFLanguageModel
from dynrag.lm.kv_reuse import KVReuse
from tests.tiny_models import tiny_gemma3, tiny_llama, tiny_llama_lm, tiny_tokenizer

BUILDERS = {"llama": tiny_llama, "gemma3": tiny_gemma3}
PROMPT = "the bridge of the town was built in 1887 by the engineer who was born in lyon . question : who built the bridge ? answer :"

@pytest.fixture(params=sorted(BUILDERS))
def pair(request):
    """(captured LM, eager reference model with identical weights, tokenizer)."""
    tok = tiny_tokenizer()
    build = BUILDERS[request.param]
    lm = HFLanguageModel(build(len(tok), seed=3), tok, name=f"tiny-{request.param}")
    eager = build(len(tok), seed=3, attn="eager")
    return lm, eager, tok

def test_captured_rows_match_eager_last_layer(pair):
    lm, eager, _ = pair
    gen = lm.generate(PROMPT, max_new_tokens=12, capture_attention=True)
    assert len(gen) == 12 and len(gen.attention) == 12
    full = torch.tensor([gen.prompt_token_ids + gen.token_ids])
    with torch.no_grad():
        reference = eager(full, output_attentions=True).attentions[-1][0].mean(0).numpy()
    p = gen.prompt_length
    for k, row in enumerate(gen.attention):
        assert row.shape == (p + k + 1,)
        np.testing.assert_allclose(row, reference[p + k, : p + k + 1], atol=1e-5)

def test_rows_sum_to_one(pair):
    lm, _, _ = pair
    gen = lm.generate(PROMPT, max_new_tokens=10, capture_attention=True)
    for row in gen.attention:
        assert abs(float(row.sum()) - 1.0) < 1e-5

def test_entropy_and_logprob_equal_direct_computation(pair):
    lm, eager, _ = pair
    gen = lm.generate(PROMPT, max_new_tokens=8)
    full = torch.tensor([gen.prompt_token_ids + gen.token_ids])
    with torch.no_grad():
        logits = eager(full).logits[0].double()
    p = gen.prompt_length
    for k, token in enumerate(gen.token_ids):
        log_p = torch.log_softmax(logits[p + k - 1], dim=-1)
        entropy = float(-(log_p.exp() * log_p).sum())
        assert gen.entropies[k] == pytest.approx(entropy, abs=1e-4)
        assert gen.logprobs[k] == pytest.approx(float(log_p[token]), abs=1e-4)
        assert token == int(torch.argmax(logits[p + k - 1]))  # greedy

def test_capture_does_not_change_the_greedy_text(pair):
    lm, _, _ = pair
    plain = lm.generate(PROMPT, max_new_tokens=16)
    captured = lm.generate(PROMPT, max_new_tokens=16, capture_attention=True)
    assert plain.token_ids == captured.token_ids
    assert plain.text == captured.text
    assert plain.attention is None

def test_capture_leaves_logits_equal_to_sdpa(pair):
    lm, _, tok = pair
    ids = torch.tensor([tok(PROMPT).input_ids])
    build = tiny_llama if "llama" in lm.name else tiny_gemma3
    sdpa = build(len(tok), seed=3)
    with torch.no_grad():
        expected = sdpa(ids).logits
        lm._recorder.reset(active=True, all_rows=True)
        got = lm.model(ids).logits
        lm._recorder.reset(active=False)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)

def test_generated_attention_matrix_is_lower_triangular(pair):
    lm, _, _ = pair
    gen = lm.generate(PROMPT, max_new_tokens=6, capture_attention=True)
    matrix = gen.generated_attention()
    assert matrix.shape == (6, 6)
    assert np.all(np.triu(matrix, 1) == 0)


def test_segments_map_prompt_positions():
    tok = tiny_tokenizer()
    lm = HFLanguageModel(tiny_llama(len(tok)), tok, name="tiny")
    prompt = Prompt().add("docs", "the river of paris . ").add("question", "who built the bridge ?")
    gen = lm.generate(prompt, max_new_tokens=2)
    words = [w.lstrip("▁") for w in tok.convert_ids_to_tokens(gen.prompt_token_ids)]
    assert [words[i] for i in gen.segment_positions("question")] == "who built the bridge ?".split()
    assert [words[i] for i in gen.segment_positions("docs")] == "the river of paris .".split()

def test_stop_string_cuts_text_and_tokens_together():
    lm = tiny_llama_lm(seed=1)
    free = lm.generate(PROMPT, max_new_tokens=10)
    assert len(free.pieces) >= 4
    stop_word = free.pieces[3].strip()
    stopped = lm.generate(PROMPT, max_new_tokens=10, stop=[stop_word])
    assert stopped.stop_reason == "stop"
    assert stop_word not in stopped.text
    assert stopped.text == "".join(stopped.pieces)
    assert len(stopped.token_ids) == len(stopped.pieces) == len(stopped.entropies)

def test_reusable_prefix_gives_identical_generation(pair):
    lm, _, _ = pair
    shared = "the old mill of the town was built in 1887 . the new school was built by the founder . "
    def prompt(question):
        return Prompt().add("exemplars", shared).mark_reusable_prefix().add("question", question)
    questions = ["who built the bridge ? answer :", "where was the engineer born ? answer :"]
    with_cache = [lm.generate(prompt(q), 8, capture_attention=True) for q in questions]
    assert lm._kv.pinned is not None
    without = []
    for q in questions:
        lm._kv = KVReuse(lm.model.config)  # nothing cached: a full prefill
        without.append(lm.generate(Prompt().add("exemplars", shared).add("question", q), 8, capture_attention=True))
    for a, b in zip(with_cache, without):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.entropies, b.entropies, atol=1e-4)
        for ra, rb in zip(a.attention, b.attention):
            np.testing.assert_allclose(ra, rb, atol=1e-5)

def test_stop_after_keeps_the_match_and_counts_the_trimmed_token():
    lm = tiny_llama_lm(seed=1)
    free = lm.generate(PROMPT, max_new_tokens=10)
    word = free.pieces[2].strip()
    stopped = lm.generate(PROMPT, max_new_tokens=10, stop_after=[word + " "])
    assert stopped.stop_reason == "stop_after"
    assert stopped.text == "".join(free.pieces[:3])  # through the match, its trailing space dropped
    assert stopped.decoded_tokens == 4 and len(stopped) == 3

def test_stop_when_sees_state_and_stops():
    lm = tiny_llama_lm(seed=1)
    seen = []
    def after_five(state):
        seen.append((len(state.token_ids), len(state.attention_rows)))
        return len(state.token_ids) == 5
    gen = lm.generate(PROMPT, max_new_tokens=10, capture_attention=True, stop_when=after_five)
    assert len(gen) == 5 and gen.stop_reason == "callback" and len(gen.attention) == 5
    # The newest token's row arrives only when it is fed back.
    assert seen[-1] == (5, 4)

def test_attention_pass_per_head_matches_eager(pair):
    lm, eager, tok = pair
    ids = tok(PROMPT, add_special_tokens=False).input_ids
    heads = lm.attention_pass(ids, per_head=True)
    mean = lm.attention_pass(ids)
    with torch.no_grad():
        reference = eager(torch.tensor([[tok.bos_token_id] + ids]), output_attentions=True).attentions[-1][0]
    np.testing.assert_allclose(heads, reference[:, 1:, 1:].numpy(), atol=1e-5)
    np.testing.assert_allclose(mean, reference.mean(0)[1:, 1:].numpy(), atol=1e-5)
