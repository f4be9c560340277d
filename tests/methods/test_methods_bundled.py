"""Every method end to end on the bundled model and the demo index (slow integration tests)."""

import re

import numpy as np

import pytest

from dynrag.corpus import read_passages
from dynrag.data import demo_passages_path, load_demo_questions
from dynrag.lm import load_lm
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_names
from dynrag.retrieval.bm25 import BM25Index

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lm():
    return load_lm("bundled:smollm2", progress=False)  # the tiny one: every method, quickly


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "index"
    BM25Index.build(read_passages(demo_passages_path()), out, progress=False)
    return BM25Index.load(out)


@pytest.fixture(scope="module")
def builder():
    return PromptBuilder.for_dataset("default")


@pytest.fixture(scope="module")
def question():
    return load_demo_questions()[0]


# SeaKR samples 20 continuations a step by default; six take its path (search, rerank, choose) in a third of the time.
QUICKER = {"seakr": {"samples": 6, "max_steps": 3}}


@pytest.mark.parametrize("name", method_names())
def test_every_method_answers_a_demo_question(name, lm, index, builder, question):
    options = {"max_new_tokens": 64, **QUICKER.get(name, {})}
    method = build_method(name, lm, None if name == "direct" else index, options, builder)
    answer = method.answer(question.question)
    assert answer.final_answer.strip(), answer.text
    assert "so the answer is" in answer.text.lower()
    data = answer.to_dict()
    assert data["generated_tokens"] > 0
    for retrieval in data["retrievals"]:
        assert retrieval["query"].strip()
        assert retrieval["hits"] and all(h["id"].startswith("demo-") for h in retrieval["hits"])


def test_single_retrieves_a_supporting_passage(lm, index, builder, question):
    answer = build_method("single", lm, index, {}, builder).answer(question.question)
    (retrieval,) = answer.trace.retrievals
    assert {h.id for h in retrieval.hits} & set(question.supporting)


@pytest.mark.parametrize("name", ["direct", "single"])
def test_a_short_answer_is_one_short_generation_opened_by_the_answer_phrase(name, lm, index, builder, question):
    answer = build_method(name, lm, None if name == "direct" else index, {"answer": "short"}, builder).answer(
        question.question)
    (step,) = answer.trace.steps
    assert step.generated_tokens <= 32
    assert answer.text.startswith(builder.answer_phrase) and answer.final_answer.strip()
    assert "\n" not in answer.final_answer and len(answer.final_answer) < len(answer.text)


def test_dragin_threshold_zero_retrieves_with_a_nonempty_query(lm, index, builder, question):
    answer = build_method("dragin", lm, index, {"theta": 0.0, "max_retrievals": 2}, builder).answer(question.question)
    assert answer.trace.retrievals
    assert answer.trace.retrievals[0].query.strip()


def test_dragin_infinite_threshold_never_retrieves_and_answers_like_direct(lm, index, builder, question):
    dragin = build_method("dragin", lm, index, {"theta": 1e12}, builder).answer(question.question)
    direct = build_method("direct", lm, None, {}, builder).answer(question.question)
    assert dragin.trace.retrievals == []
    assert dragin.final_answer == direct.final_answer


def test_fixed_sentence_retrieves_once_per_sentence_but_the_last(lm, index, builder, question):
    answer = build_method("fixed_sentence", lm, index, {"max_retrievals": 10}, builder).answer(question.question)
    sentences = [s for s in answer.trace.steps if s.kind == "generate" and s.kept_text.strip()]
    assert len(answer.trace.retrievals) == len(sentences) - 1
    for step, retrieval in zip(sentences, answer.trace.retrievals):
        assert retrieval.query == " ".join(step.kept_text.split())
        assert re.search(r"[.?!]$", step.kept_text.strip())


def test_flare_retrieves_only_for_sentences_with_a_low_probability_token(lm, index, builder, question):
    theta = 0.3
    answer = build_method("flare", lm, index, {"theta": theta, "max_retrievals": 10}, builder).answer(question.question)
    tentative = [s for s in answer.trace.steps if s.kind == "tentative"]
    assert len(tentative) == len(answer.trace.retrievals)
    for step in tentative:
        assert any(p < theta for p, tok in zip(step.details["probabilities"], step.details["tokens"]) if tok.strip())
    for step in answer.trace.steps:
        if step.kind == "generate" and not step.details.get("regenerated"):
            assert all(p >= theta for p, tok in zip(step.details["probabilities"], step.details["tokens"])
                       if tok.strip())


def test_dragin_reference_variant_on_the_bundled_model(lm, index, builder, question):
    options = {"variant": "reference", "theta": 0.0, "max_retrievals": 2, "max_new_tokens": 64}
    answer = build_method("dragin", lm, index, options, builder).answer(question.question)
    assert answer.trace.retrievals and "so the answer is" in answer.text.lower()
    for retrieval in answer.trace.retrievals:
        assert retrieval.query.strip() and lm.count_tokens(retrieval.query) <= 64
    with_documents = [s for s in answer.trace.steps if s.details.get("with_documents")]
    assert len(with_documents) == len(answer.trace.retrievals)  # one sentence per retrieval
@pytest.mark.parametrize("name", ["dragin", "flare"])
def test_cache_reuse_leaves_every_record_as_a_cold_run_gives_it(name, lm, index, builder, question):
    """The bundled model, cache reuse on against off: the same answer, trace, token ids,
    log-probabilities and captured attention rows, with fewer tokens prefilled."""
    calls = []
    generate = lm.generate

    def recording(*args, **kwargs):
        calls.append(generate(*args, **kwargs))
        return calls[-1]

    answers, counts, gens = {}, {}, {}
    lm.generate = recording
    try:
        for mode in ("off", "recent"):
            lm.kv_reuse = mode
            calls.clear()
            before = lm.prefill_counts
            answers[mode] = build_method(name, lm, index, {"theta": 0.2}, builder).answer(question.question).to_dict()
            counts[mode], gens[mode] = lm.prefill_counts.minus(before), list(calls)
    finally:
        del lm.generate
        lm.kv_reuse = "recent"
    steps = {mode: data.pop("steps") for mode, data in answers.items()}
    for data in answers.values():
        data.pop("seconds")
    assert answers["recent"] == answers["off"]  # answer, retrievals (queries, hits), token counts
    assert len(steps["recent"]) == len(steps["off"])
    for a, b in zip(steps["recent"], steps["off"]):
        numbers = [k for k, v in a["details"].items() if isinstance(v, list) and v and isinstance(v[0], float)]
        for key in numbers:  # per-word signals, rounded to 4 places: a last digit may differ
            np.testing.assert_allclose(a["details"].pop(key), b["details"].pop(key), atol=2e-4)
        assert a == b
    assert len(gens["recent"]) == len(gens["off"]) >= 2
    for a, b in zip(gens["recent"], gens["off"]):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-4)
        np.testing.assert_allclose(a.entropies, b.entropies, atol=1e-4)
        for ra, rb in zip(a.attention or [], b.attention or []):
            np.testing.assert_allclose(ra, rb, atol=1e-5)
    assert counts["off"].reused_tokens == 0
    assert counts["recent"].prompt_tokens == counts["off"].prompt_tokens
    assert counts["recent"].hits >= 1 and counts["recent"].prefilled_tokens < counts["off"].prefilled_tokens
