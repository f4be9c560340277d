"""The batching engine on a tiny random Llama: every row decodes as it would alone."""

import threading

import numpy as np
import pytest

from dynrag.errors import ConfigError
from dynrag.lm.base import Prompt
from dynrag.lm.batch_engine import BatchEngine
from dynrag.lm.batching import BatchingLM
from dynrag.lm.hf import HFLanguageModel
from tests.fakes import ScriptedLM
from tests.tiny_models import tiny_gemma3, tiny_llama, tiny_tokenizer
from tests.waiting import HANG_GUARD_S

TOK = tiny_tokenizer()
BASE = "the bridge of the town was built in 1887 by the engineer who was born in lyon . "


def model(draft_tokens: int = 0, seed: int = 3) -> HFLanguageModel:
    return HFLanguageModel(tiny_llama(len(TOK), seed=seed), TOK, name="tiny", draft_tokens=draft_tokens)


def prompts(n: int) -> list[str]:
    # Different lengths, so rows are padded differently and leave at different steps.
    return [BASE * (1 + i % 3) + f"question {i} : who built the bridge of town {i} ? answer :" for i in range(n)]


def assert_same(alone, batched, atol=1e-5):
    assert batched.token_ids == alone.token_ids
    assert batched.text == alone.text
    assert batched.stop_reason == alone.stop_reason
    assert batched.decoded_tokens == alone.decoded_tokens
    np.testing.assert_allclose(batched.logprobs, alone.logprobs, atol=1e-4)
    np.testing.assert_allclose(batched.entropies, alone.entropies, atol=1e-4)
    if alone.attention is None:
        assert batched.attention is None
    else:
        assert len(batched.attention) == len(alone.attention)
        for a, b in zip(alone.attention, batched.attention):
            assert a.shape == b.shape
            assert float(np.abs(a - b).max()) < atol


def test_rows_join_and_leave_and_each_decodes_as_alone():
    texts = prompts(5)
    limits = [3, 9, 5, 12, 7]
    alone = model()
    expected = [alone.generate(t, n, capture_attention=True) for t, n in zip(texts, limits)]
    engine = BatchEngine(model(), max_rows=2)
    engine.start_together(2)
    futures = [engine.submit(t, n, capture_attention=True) for t, n in zip(texts, limits)]
    results = [f.result(timeout=HANG_GUARD_S) for f in futures]
    engine.close()
    for e, r in zip(expected, results):
        assert_same(e, r)
    # Two rows at most, five requests: later ones joined as earlier ones left.
    assert engine.stats.peak_rows == 2
    assert engine.stats.row_steps > engine.stats.steps


def test_each_row_keeps_its_own_stop_strings_and_callback():
    texts = prompts(4)
    seen_lengths: dict[int, list[int]] = {0: [], 3: []}

    def stop_after_four(state):
        seen_lengths[0].append(len(state.attention_rows))
        return len(state.token_ids) >= 4

    def never(state):
        seen_lengths[3].append(len(state.token_ids))
        return False

    calls = [
        dict(stop_when=stop_after_four, capture_attention=True),
        dict(stop=["town"]),
        dict(stop_after=[" the"]),
        dict(stop_when=never),
    ]
    alone = model()
    expected = [alone.generate(t, 10, **kw) for t, kw in zip(texts, calls)]
    alone_seen = {k: list(v) for k, v in seen_lengths.items()}
    seen_lengths[0].clear(), seen_lengths[3].clear()
    engine = BatchEngine(model(), max_rows=4)
    results = [f.result(timeout=HANG_GUARD_S) for f in [engine.submit(t, 10, **kw) for t, kw in zip(texts, calls)]]
    engine.close()
    for e, r in zip(expected, results):
        assert_same(e, r)
    assert results[0].stop_reason == "callback" and len(results[0]) == 4
    # The callback saw the rows of the tokens already fed back, as alone.
    assert seen_lengths == alone_seen


def test_a_failing_callback_ends_only_its_own_row():
    texts = prompts(3)

    def boom(state):
        if len(state.token_ids) == 2:
            raise ValueError("callback failed")
        return False

    engine = BatchEngine(model(), max_rows=3)
    futures = [engine.submit(texts[0], 8), engine.submit(texts[1], 8, stop_when=boom), engine.submit(texts[2], 8)]
    with pytest.raises(ValueError, match="callback failed"):
        futures[1].result(timeout=HANG_GUARD_S)
    alone = model()
    assert_same(alone.generate(texts[0], 8), futures[0].result(timeout=HANG_GUARD_S))
    assert_same(alone.generate(texts[2], 8), futures[2].result(timeout=HANG_GUARD_S))
    engine.close()


def test_memory_cap_admits_one_row_at_a_time_when_two_would_not_fit():
    texts = prompts(3)
    width = max(len(TOK(t).input_ids) for t in texts)
    engine = BatchEngine(model(), max_rows=8, max_cached_tokens=width + 20)
    futures = [engine.submit(t, 6) for t in texts]
    results = [f.result(timeout=HANG_GUARD_S) for f in futures]
    engine.close()
    assert engine.stats.peak_rows == 1
    alone = model()
    for t, r in zip(texts, results):
        assert_same(alone.generate(t, 6), r)


def test_the_shared_prefix_is_computed_once_for_every_row():
    exemplars = BASE * 3

    def prompt(i):
        return Prompt().add("exemplars", exemplars).mark_reusable_prefix().add("question", f"question {i} : who ? answer :")

    lm = model()
    prefix_tokens = len(TOK(exemplars).input_ids)
    engine = BatchEngine(lm, max_rows=4)
    results = [f.result(timeout=HANG_GUARD_S) for f in [engine.submit(prompt(i), 6) for i in range(4)]]
    engine.close()
    counts = lm.prefill_counts
    assert counts.pinned_tokens <= prefix_tokens  # pinned once, not once per row
    assert counts.reused_tokens >= 4 * (prefix_tokens - 2)
    cold = model()
    cold.kv_reuse = "off"
    for i, r in enumerate(results):
        assert_same(cold.generate(prompt(i), 6), r, atol=1e-4)


def test_threads_share_one_model_through_batching_lm():
    texts = prompts(6)
    alone = model(draft_tokens=5)
    expected = [alone.generate(t, 8, capture_attention=True) for t in texts]
    lm = BatchingLM(model(draft_tokens=5), max_rows=3)
    results: list = [None] * len(texts)

    def ask(i):
        results[i] = lm.generate(texts[i], 8, capture_attention=True)
        # A scoring call from the same thread runs between decode steps.
        assert lm.next_token_logprobs(texts[i], ["the", "lyon"]).shape == (2,)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_GUARD_S)
    lm.close()
    for e, r in zip(expected, results):
        assert_same(e, r)
    assert lm.count_tokens(texts[0]) == alone.count_tokens(texts[0])


def test_a_lone_request_on_an_idle_engine_decodes_alone_with_drafts():
    lm = BatchingLM(model(draft_tokens=5), max_rows=4)
    text = prompts(1)[0]
    got = lm.generate(text, 10)
    lm.close()
    assert lm.stats.solo == 1 and lm.stats.steps == 0
    assert_same(model(draft_tokens=5).generate(text, 10), got)


def test_models_that_cannot_batch_are_refused_naming_the_reason():
    with pytest.raises(ConfigError, match="local model"):
        BatchingLM(ScriptedLM(lambda prompt: "x"), max_rows=4)
    gemma = HFLanguageModel(tiny_gemma3(len(TOK), seed=1), TOK, name="tiny-gemma3")
    with pytest.raises(ConfigError, match="sliding-window"):
        BatchingLM(gemma, max_rows=4)


def test_start_together_holds_generations_until_enough_wait_and_runs_calls_meanwhile():
    texts = prompts(3)
    alone = model()
    expected = [alone.generate(t, 4) for t in texts]
    engine = BatchEngine(model(), max_rows=3)
    engine.start_together(3)
    first = engine.submit(texts[0], 4)
    # A model call is not queued behind the held generation, and the generation stays held.
    assert engine.call(lambda: engine.lm.count_tokens(texts[0])) == alone.count_tokens(texts[0])
    assert not first.done()
    futures = [first, *(engine.submit(t, 4) for t in texts[1:])]
    results = [f.result(timeout=HANG_GUARD_S) for f in futures]
    engine.close()
    for e, r in zip(expected, results):
        assert_same(e, r)
    assert engine.stats.peak_rows == 3 and engine.stats.solo == 0
    with pytest.raises(ValueError, match=r"start_together\(3\)"):
        BatchEngine(model(), max_rows=2).start_together(3)
