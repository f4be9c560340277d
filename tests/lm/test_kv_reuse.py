"""Reusing the key/value caches of earlier calls: same outputs as a fresh prefill, less prefill."""

import numpy as np
import pytest
import torch

from dynrag.lm.base import Prompt
from dynrag.lm.hf import HFLanguageModel
from dynrag.lm.kv_reuse import KVReuse, common_prefix
from tests.tiny_models import tiny_gemma3, tiny_llama, tiny_tokenizer

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


def test_lookup_picks_the_longest_prefix_and_crops_it_back():
    model = tiny_llama(64, seed=1)
    kv = KVReuse(model.config, slots=2)

    def filled(ids):
        cache = kv.new_cache()
        with torch.no_grad():
            model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True)
        return cache

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
