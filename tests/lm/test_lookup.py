"""Prompt-lookup drafts: the guess itself (hand-computed), and decoding with drafts giving what
one-token-at-a-time decoding gives."""

import numpy as np
import pytest
import torch

from dynrag.lm.hf import HFLanguageModel
from dynrag.lm.kv_reuse import KVReuse, drop_last
from dynrag.lm.lookup import lookup_draft
from tests.lm.test_kv_reuse import DOCS, dragin_like_calls, prompt
from tests.tiny_models import tiny_gemma3, tiny_llama, tiny_tokenizer


def test_the_tokens_after_the_suffixs_earlier_occurrence_are_the_guess():
    # suffix [1, 2, 3] occurred at the start; what followed it there is the guess
    assert lookup_draft([1, 2, 3, 9, 8, 7, 1, 2, 3], 5, min_tokens=1) == [9, 8, 7, 1, 2]
    assert lookup_draft([1, 2, 3, 9, 8, 7, 1, 2, 3], 2, min_tokens=1) == [9, 8]
    # nothing before repeats the last token: no guess
    assert lookup_draft([1, 2, 3, 4], 5, min_tokens=1) == []
    assert lookup_draft([], 5) == [] and lookup_draft([4], 5) == []
    assert lookup_draft([1, 2, 1, 2], 0, min_tokens=1) == []


def test_the_longest_suffix_wins_then_the_latest_occurrence_that_leaves_enough():
    # [1, 2] occurred at 1 (then 8, 2, 9); the one-token suffix [2] occurred later, at 4 (then 9)
    assert lookup_draft([7, 1, 2, 8, 2, 9, 1, 2], 3, min_tokens=1) == [8, 2, 9]
    # [5, 6] at 0 and at 3: the latest (3) leaves [2, 5, 6]
    assert lookup_draft([5, 6, 1, 5, 6, 2, 5, 6], 3, min_tokens=1) == [2, 5, 6]
    # asking for at least 4 tokens after it, only the occurrence at 0 qualifies
    assert lookup_draft([5, 6, 1, 5, 6, 2, 5, 6], 4, min_tokens=4) == [1, 5, 6, 2]
    # at least 5 after it: again only the occurrence at 0
    assert lookup_draft([5, 6, 1, 5, 6, 2, 5, 6], 5, min_tokens=5) == [1, 5, 6, 2, 5]
    # min_tokens above max_tokens asks only for max_tokens
    assert lookup_draft([1, 2, 9, 1, 2], 1, min_tokens=3) == [9]
    assert lookup_draft(np.array([3, 4, 5, 3]), 2, max_ngram=1, min_tokens=2) == [4, 5]


def test_drop_last_cuts_every_layer_back():
    model = tiny_llama(64, seed=1)
    kv = KVReuse(model.config)
    cache = kv.new_cache()
    with torch.no_grad():
        model(input_ids=torch.tensor([list(range(3, 10))]), cache=cache, use_cache=True)
    keys = [layer.keys.clone() for layer in cache.layers]
    drop_last(cache, 3)
    assert cache.get_seq_length() == 4
    for layer, before in zip(cache.layers, keys):
        assert torch.equal(layer.keys, before[..., :4, :])
    drop_last(cache, 0)
    assert cache.get_seq_length() == 4


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_decoding_with_drafts_gives_the_tokens_rows_and_logits_of_one_token_at_a_time(kind):
    tok = tiny_tokenizer()
    build = tiny_llama if kind == "llama" else tiny_gemma3
    drafting = HFLanguageModel(build(len(tok), seed=11), tok, kind, draft_tokens=5)
    plain = HFLanguageModel(build(len(tok), seed=11), tok, kind, draft_tokens=0)
    with_drafts, without = dragin_like_calls(drafting), dragin_like_calls(plain)
    # one long generation too, where a random model's repetitions give drafts to accept
    with_drafts.append(drafting.generate(prompt(DOCS), 40, capture_attention=True))
    without.append(plain.generate(prompt(DOCS), 40, capture_attention=True))
    for a, b in zip(with_drafts, without):
        assert a.token_ids == b.token_ids and a.stop_reason == b.stop_reason
        assert a.decoded_tokens == b.decoded_tokens
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_allclose(a.entropies, b.entropies, atol=1e-5)
        assert (a.attention is None) == (b.attention is None)
        assert len(a.attention or []) == len(b.attention or [])
        for ra, rb in zip(a.attention or [], b.attention or []):
            np.testing.assert_allclose(ra, rb, atol=1e-5)
    counts, none = drafting.prefill_counts, plain.prefill_counts
    assert counts.draft_accepted > 0 and counts.draft_proposed >= counts.draft_accepted
    assert none.draft_proposed == none.draft_accepted == 0
    # what the cache held afterwards is what was fed: the next call reuses it exactly as before
    assert counts.reused_tokens == none.reused_tokens


def test_a_callback_sees_the_rows_of_the_tokens_before_the_newest_with_or_without_drafts():
    tok = tiny_tokenizer()
    seen = {}
    for drafts in (0, 5):
        lm = HFLanguageModel(tiny_llama(len(tok), seed=11), tok, "tiny", draft_tokens=drafts)
        calls = []

        def watch(state, calls=calls):
            assert len(state.attention_rows) == len(state.token_ids) - 1
            calls.append([row.copy() for row in state.attention_rows])
            return False

        gen = lm.generate(prompt(DOCS), 30, capture_attention=True, stop_when=watch)
        seen[drafts] = (gen.token_ids, calls)
        if drafts:
            assert lm.prefill_counts.draft_accepted > 0
    assert seen[0][0] == seen[5][0]
    assert len(seen[0][1]) == len(seen[5][1]) == len(seen[0][0])
    for rows_a, rows_b in zip(seen[0][1], seen[5][1]):
        for ra, rb in zip(rows_a, rows_b):
            np.testing.assert_allclose(ra, rb, atol=1e-5)


def test_a_stopping_callback_leaves_no_draft_in_the_cache():
    tok = tiny_tokenizer()
    lm = HFLanguageModel(tiny_llama(len(tok), seed=11), tok, "tiny", draft_tokens=5)
    gen = lm.generate(prompt(DOCS), 30, stop_when=lambda state: len(state.token_ids) == 12)
    assert len(gen) == 12 and gen.stop_reason == "callback"
    (key, cache), = lm._kv.recent.items()
    assert cache.get_seq_length() == len(key) == gen.prompt_length + 11  # the 12th was never fed
    assert list(key) == gen.prompt_token_ids + gen.token_ids[:11]


# --- stops inside an accepted draft: the same tokens and stop reasons as one token at a time --------


def tiny_pair(seed=11):
    tok = tiny_tokenizer()
    return (HFLanguageModel(tiny_llama(len(tok), seed=seed), tok, "drafts", draft_tokens=5, kv_reuse="off"),
            HFLanguageModel(tiny_llama(len(tok), seed=seed), tok, "plain", draft_tokens=0, kv_reuse="off"))


def accepted_positions(lm, n=40, the_prompt=None):
    """Indices of the generated tokens that came out of an accepted draft (no stop applied)."""
    seen = []
    lm.generate(the_prompt or prompt(DOCS), n,
                stop_when=lambda state: seen.append(lm.prefill_counts.draft_accepted) or False)
    # token i matched a draft when the accepted count grew between the callbacks of tokens i and i + 1
    return [i for i in range(len(seen) - 1) if seen[i + 1] > seen[i]]


@pytest.fixture(scope="module")
def long_run():
    drafting, plain = tiny_pair()
    full = plain.generate(prompt(DOCS), 40)
    accepted = accepted_positions(drafting)
    assert full.stop_reason == "length" and len(accepted) >= 3, "the test needs drafts accepted within 40 tokens"
    return drafting, plain, full, accepted


def start_of(gen, i):
    return sum(len(p) for p in gen.pieces[:i])


def stop_inside_a_draft(full, accepted):
    """A two-token string whose first occurrence in the output starts at an accepted draft token."""
    for i in accepted[1:]:
        s = full.pieces[i] + full.pieces[i + 1] if i + 1 < len(full) else full.pieces[i]
        if full.text.find(s) == start_of(full, i) and s.strip():
            return i, s
    pytest.fail("no stop string starts inside an accepted draft")


def assert_same(a, b):
    assert a.token_ids == b.token_ids and a.pieces == b.pieces
    assert a.stop_reason == b.stop_reason and a.decoded_tokens == b.decoded_tokens
    np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    assert (a.attention is None) == (b.attention is None)
    for ra, rb in zip(a.attention or [], b.attention or []):
        np.testing.assert_allclose(ra, rb, atol=1e-5)


def test_a_stop_string_inside_an_accepted_draft(long_run):
    drafting, plain, full, accepted = long_run
    i, s = stop_inside_a_draft(full, accepted)
    a = drafting.generate(prompt(DOCS), 40, stop=[s], capture_attention=True)
    b = plain.generate(prompt(DOCS), 40, stop=[s], capture_attention=True)
    assert_same(a, b)
    assert a.stop_reason == "stop" and a.token_ids == full.token_ids[:i]  # cut where the string begins
    assert len(a.attention) == len(a.token_ids)


def test_stop_after_inside_an_accepted_draft(long_run):
    drafting, plain, full, accepted = long_run
    i, s = stop_inside_a_draft(full, accepted)
    a = drafting.generate(prompt(DOCS), 40, stop_after=[s])
    b = plain.generate(prompt(DOCS), 40, stop_after=[s])
    assert_same(a, b)
    assert a.stop_reason == "stop_after" and a.text.endswith(s.rstrip())
    assert a.token_ids == full.token_ids[: len(a.token_ids)]


def test_eos_inside_an_accepted_draft(long_run):
    drafting, plain, full, _ = long_run
    # A drafted token always occurred before; for the first occurrence *in the output* to be drafted,
    # the answer so far (in the prompt) must hold the repetition: eight tokens of the long run.
    answered = prompt(DOCS, "".join(full.pieces[:8]).strip())
    free = plain.generate(answered, 20)
    accepted = accepted_positions(drafting, 20, answered)
    i = next(i for i in accepted if free.token_ids[i] not in free.token_ids[:i])
    old = drafting.eos_token_ids, plain.eos_token_ids
    drafting.eos_token_ids = plain.eos_token_ids = {free.token_ids[i]}  # that token now ends the text
    try:
        a = drafting.generate(answered, 20, capture_attention=True)
        b = plain.generate(answered, 20, capture_attention=True)
    finally:
        drafting.eos_token_ids, plain.eos_token_ids = old
    assert_same(a, b)
    assert a.stop_reason == "eos" and a.token_ids == free.token_ids[: i + 1] and a.pieces[-1] == ""
    assert len(a.attention) == len(a.token_ids)


def test_a_callback_stop_at_an_accepted_draft_with_attention(long_run):
    drafting, plain, full, accepted = long_run
    i = accepted[len(accepted) // 2]
    gens = [lm.generate(prompt(DOCS), 40, capture_attention=True,
                        stop_when=lambda state, n=i + 1: len(state.token_ids) == n) for lm in (drafting, plain)]
    assert_same(*gens)
    a = gens[0]
    assert a.stop_reason == "callback" and a.token_ids == full.token_ids[: i + 1]
    assert len(a.attention) == len(a.token_ids)  # the stopping token's row too, drafted or fed after
