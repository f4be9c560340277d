"""Reusing the key/value caches of earlier calls: same outputs as a fresh prefill, less prefill."""

import numpy as np
import pytest
import torch

from dynrag.lm.base import Prompt
from dynrag.lm.hf import HFLanguageModel
from dynrag.lm.kv_reuse import KVReuse, common_prefix
from tests.tiny_models import tiny_gemma3, tiny_llama, tiny_llama_lm, tiny_tokenizer

BASE = "the old bridge of the town was built in 1887 by an engineer who was born in paris and"
EXTENSIONS = [" the river", " the river rhone flows south through lyon", " the museum of the harbour town"]


def pair(kind):
    tok = tiny_tokenizer()
    build = tiny_llama if kind == "llama" else tiny_gemma3
    return HFLanguageModel(build(len(tok), seed=7), tok, kind), HFLanguageModel(build(len(tok), seed=7), tok, kind)


def count_prefill(lm):
    seen = []
    lm.model.base_model.register_forward_hook(lambda module, args, kwargs, out: seen.append(kwargs["input_ids"].shape[1]),
                                              with_kwargs=True)
    return seen


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_extending_and_branching_prompts_give_what_a_fresh_model_gives(kind):
    reusing, fresh = pair(kind)
    prefills = count_prefill(reusing)
    for ext in [EXTENSIONS[0], EXTENSIONS[1], EXTENSIONS[2], EXTENSIONS[1]]:
        prompt = Prompt().add("shared", BASE).mark_reusable_prefix().add("rest", ext)
        got = reusing.generate(prompt, 6)
        fresh._kv = KVReuse(fresh.model.config)  # nothing to reuse: a full prefill every time
        want = fresh.generate(prompt, 6)
        assert got.token_ids == want.token_ids
        np.testing.assert_allclose(got.logprobs, want.logprobs, atol=1e-4)
        np.testing.assert_allclose(reusing.next_token_logprobs(prompt, [" town", " river"]),
                                   fresh.next_token_logprobs(prompt, [" town", " river"]), atol=1e-4)
    # a prompt that extends the last call (prompt + what it generated) prefills only its new tail
    last = Prompt().add("shared", BASE).mark_reusable_prefix().add("rest", EXTENSIONS[1])
    gen = reusing.generate(last, 4)
    prefills.clear()
    longer = Prompt().add("shared", BASE).mark_reusable_prefix().add("rest", EXTENSIONS[1] + gen.text + " and")
    reusing.generate(longer, 2)
    total = len(reusing.tokenizer(longer.text).input_ids)
    assert prefills[0] <= total - len(reusing.tokenizer(BASE + EXTENSIONS[1]).input_ids) + 1


def filler(model, kv):
    """ids -> a cache of `kv`'s kind holding `model`'s keys and values for them."""
    def filled(ids):
        cache = kv.new_cache()
        with torch.no_grad():
            model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
        return cache
    return filled


def test_lookup_picks_the_longest_prefix_and_crops_it_back():
    model = tiny_llama(64, seed=1)
    kv = KVReuse(model.config, slots=2)
    filled = filler(model, kv)

    a = list(range(3, 20))
    kv.store(a, filled(a))
    cache, n = kv.lookup(a[:12] + [40, 41])
    assert n == 12 and cache.get_seq_length() == 12  # cropped copy
    assert kv.recent[tuple(a)].get_seq_length() == len(a)  # the stored entry is untouched
    cache, n = kv.lookup(a + [50])
    assert n == len(a)
    cache, n = kv.lookup(a)  # at least one token must be left to feed
    assert n == len(a) - 1
    assert kv.lookup([60, 61, 62] + a)[1] == 0
    for other in ([30 + i for i in range(10)], [45 + i for i in range(10)]):
        kv.store(other, filled(other))
    assert tuple(a) not in kv.recent and len(kv.recent) == 2  # least recently used went first
    assert common_prefix((1, 2, 3), [1, 2, 4]) == 2


# ---- attention capture with reuse: every record equals a cold run's ---------------------------

EXEMPLARS = "question : who built the old mill ? answer : the founder of the town . so the answer is the founder . "
DOCS = "the bridge of the town was built in 1887 by the engineer who was born in lyon . "
QUESTION = "question : who built the bridge ? answer :"


def prompt(docs: str = "", answer: str = "") -> Prompt:
    p = Prompt().add("exemplars", EXEMPLARS).mark_reusable_prefix()
    return p.add("documents", docs).add("question", QUESTION).add("answer", answer)


def dragin_like_calls(lm):
    """The calls a dynamic method makes: a first answer without documents, one that continues it,
    one with documents (only the exemplars shared), one cut back inside its output (the cache is
    cropped), and a finishing call that extends that."""
    gens = [lm.generate(prompt(), 6, capture_attention=True)]
    gens.append(lm.generate(prompt(answer=gens[0].text), 5, capture_attention=True))
    gens.append(lm.generate(prompt(DOCS), 7, capture_attention=True))
    cut = "".join(gens[2].pieces[:3])
    gens.append(lm.generate(prompt(DOCS, cut), 4, capture_attention=True))
    gens.append(lm.generate(prompt(DOCS, cut + "".join(gens[3].pieces) + " so the answer is"), 3))
    return gens


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_captured_rows_logits_and_tokens_with_reuse_equal_a_cold_run(kind):
    tok = tiny_tokenizer()
    build = tiny_llama if kind == "llama" else tiny_gemma3  # gemma3: sliding window of 4 on 3 of 4 layers
    reusing = HFLanguageModel(build(len(tok), seed=11), tok, kind)
    cold = HFLanguageModel(build(len(tok), seed=11), tok, kind, kv_reuse="off")
    warm, fresh = dragin_like_calls(reusing), dragin_like_calls(cold)
    for a, b in zip(warm, fresh):
        assert a.prompt_token_ids == b.prompt_token_ids
        assert a.token_ids == b.token_ids and a.stop_reason == b.stop_reason
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_allclose(a.entropies, b.entropies, atol=1e-5)
        assert (a.attention is None) == (b.attention is None)
        for ra, rb in zip(a.attention or [], b.attention or []):
            assert ra.shape == rb.shape
            np.testing.assert_allclose(ra, rb, atol=1e-5)
    # The cold model computed every prompt token; the reusing one only what no earlier call had.
    c, w = cold.prefill_counts, reusing.prefill_counts
    assert c.reused_tokens == 0 and c.pinned_tokens == 0 and c.prefilled_tokens == c.prompt_tokens
    assert w.prompt_tokens == c.prompt_tokens and w.calls == c.calls == 5
    exemplars = len(reusing._kv.pinned[0])  # the tokens of the marked prefix
    assert exemplars == w.pinned_tokens > 10
    lengths = [len(g.prompt_token_ids) for g in warm]
    # call 1: the exemplars (pinned); 2: call 1's prompt and output; 3: the exemplars; 4: call 3's
    # prompt and the kept part of its output; 5: call 4's prompt and output. At least the last
    # prompt token is always fed, for the next token's logits.
    shared = [exemplars, lengths[0] + len(warm[0]), exemplars, lengths[2] + 3, lengths[3] + len(warm[3])]
    expected = [min(n, length - 1) for n, length in zip(shared, lengths)]
    assert w.reused_tokens == sum(expected)
    assert w.hits == 3
    assert w.prefilled_tokens == w.prompt_tokens - sum(expected) + exemplars


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_rows_of_a_continuation_from_the_cache_match_one_eager_pass(kind):
    tok = tiny_tokenizer()
    build = tiny_llama if kind == "llama" else tiny_gemma3
    lm = HFLanguageModel(build(len(tok), seed=5), tok, kind)
    eager = build(len(tok), seed=5, attn="eager")
    first = lm.generate(prompt(DOCS), 6, capture_attention=True)
    before = lm.prefill_counts
    gen = lm.generate(prompt(DOCS, first.text + " so"), 6, capture_attention=True)
    assert lm.prefill_counts.minus(before).reused_tokens == first.prompt_length + len(first)
    full = torch.tensor([gen.prompt_token_ids + gen.token_ids])
    with torch.no_grad():
        out = eager(full, output_attentions=True)
    reference = out.attentions[-1][0].mean(0).numpy()
    log_p = torch.log_softmax(out.logits[0].float(), dim=-1)
    p = gen.prompt_length
    for k, row in enumerate(gen.attention):
        np.testing.assert_allclose(row, reference[p + k, : p + k + 1], atol=1e-5)
        assert gen.token_ids[k] == int(torch.argmax(log_p[p + k - 1]))
        assert gen.logprobs[k] == pytest.approx(float(log_p[p + k - 1, gen.token_ids[k]]), abs=1e-4)


def test_modes_prefix_and_off_reuse_only_the_exemplars_or_nothing():
    lm = tiny_llama_lm(seed=2)
    dragin_like_calls(lm)
    exemplars = len(lm._kv.pinned[0])
    for mode, reused_per_call in (("prefix", exemplars), ("off", 0)):
        lm.kv_reuse = mode
        before = lm.prefill_counts
        dragin_like_calls(lm)
        counts = lm.prefill_counts.minus(before)
        assert counts.calls == 5 and counts.reused_tokens == 5 * reused_per_call and counts.hits == 0
        assert not lm._kv.recent
    lm.kv_reuse = "recent"
    before = lm.prefill_counts
    dragin_like_calls(lm)
    assert lm.prefill_counts.minus(before).hits == 3
    assert len(lm._kv.recent) <= 2  # distinct branches only: an extended sequence replaces its prefix


def test_a_stored_sequence_replaces_the_ones_it_extends_and_lru_stays_bounded():
    model = tiny_llama(64, seed=1)
    kv = KVReuse(model.config, slots=3)
    filled = filler(model, kv)

    a = list(range(3, 20))
    kv.store(a, filled(a))
    kv.store(a + [30, 31], filled(a + [30, 31]))
    assert list(kv.recent) == [tuple(a + [30, 31])]
    kv.store(a[:10], filled(a[:10]))  # covered by what is kept: nothing new
    assert list(kv.recent) == [tuple(a + [30, 31])]
    for start in (30, 40, 50):
        kv.store(list(range(start, start + 9)), filled(list(range(start, start + 9))))
    assert len(kv.recent) == 3 and tuple(a + [30, 31]) not in kv.recent
