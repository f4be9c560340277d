"""Every method answers the same through the batching engine, many questions at once on threads,
as one question at a time: same traces, and every captured attention row within 1e-5."""

import threading

import numpy as np
import pytest

from dynrag.lm.batching import BatchingLM
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_names, method_traits, parse_options
from dynrag.retrieval.base import Hit
from tests.fakes import FakeRetriever
from tests.tiny_models import tiny_llama_lm
from tests.waiting import HANG_GUARD_S

HITS = [Hit(f"p{i}", f"town {i}", f"the bridge of town {i} was built by the engineer from lyon in {1880 + i} .", 1.0)
        for i in range(4)]
QUESTIONS = [f"who built the bridge of town {i} ?" for i in range(4)]
# Low thresholds, so the tiny model's flat distributions make the dynamic methods retrieve.
# SeaKR: few samples and steps, since what is compared is the batching, not the estimate.
OPTIONS = {"dragin": {"theta": 0.01}, "flare": {"theta": 0.9}, "etc": {"theta": 0.0},
           "seakr": {"samples": 3, "max_steps": 2, "max_step_tokens": 12}}


class Recording:
    """Passes calls through, keeping every Generation by (prompt, limit) in call order."""

    def __init__(self, lm):
        self.lm, self.calls, self.lock = lm, {}, threading.Lock()

    def generate(self, prompt, max_new_tokens, *args, **kwargs):
        out = self.lm.generate(prompt, max_new_tokens, *args, **kwargs)
        with self.lock:
            self.calls.setdefault((out.prompt.text, max_new_tokens), []).append(out)
        return out

    def __getattr__(self, name):
        return getattr(self.lm, name)


def close(a, b, path="") -> None:
    """Equal, except that floats (rounded entropies, attention weights) may differ by rounding."""
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=2e-4), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            close(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            close(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


def answers(name, lm, threads):
    options = parse_options(name, {"max_new_tokens": 24, **OPTIONS.get(name, {})})
    retriever = FakeRetriever(HITS) if method_traits(name).needs_retrieval else None
    method = build_method(name, lm, retriever, options, PromptBuilder.for_dataset("default", 2))
    out = [None] * len(QUESTIONS)

    def ask(i):
        out[i] = method.answer(QUESTIONS[i]).to_dict()

    if threads:
        workers = [threading.Thread(target=ask, args=(i,)) for i in range(len(QUESTIONS))]
        for w in workers:
            w.start()
        for w in workers:
            w.join(HANG_GUARD_S)
    else:
        for i in range(len(QUESTIONS)):
            ask(i)
    return out


def batched_cases():
    """Methods that sample many continuations per decision cost seconds even on the tiny model."""
    return [pytest.param(n, marks=pytest.mark.slow) if method_traits(n).needs_hidden_states else n
            for n in method_names()]


@pytest.mark.parametrize("name", batched_cases())
def test_batched_answers_equal_one_question_at_a_time(name):
    alone = Recording(tiny_llama_lm(seed=3))
    expected = answers(name, alone, threads=False)
    batching = BatchingLM(tiny_llama_lm(seed=3), max_rows=4)
    batching.engine.start_together(2)  # every question generates, so two rows do overlap
    batched = Recording(batching)
    got = answers(name, batched, threads=True)
    batching.close()
    for e, g in zip(expected, got):
        for key in ("answer", "final_answer", "retrievals", "generated_tokens", "kept_tokens", "steps"):
            close(g[key], e[key], key)
    assert batched.calls.keys() == alone.calls.keys()
    captured = 0
    for key, gens in alone.calls.items():
        for a, b in zip(gens, batched.calls[key]):
            assert b.token_ids == a.token_ids
            if a.attention is not None:
                captured += 1
                assert max(float(np.abs(x - y).max()) for x, y in zip(a.attention, b.attention)) < 1e-5
    if method_traits(name).needs_attention:
        assert captured > 0
    assert batching.stats.peak_rows > 1  # questions did decode together
