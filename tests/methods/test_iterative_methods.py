"""Mechanics of the interleaved methods on a tiny random model and a real BM25 index (fast)."""

import numpy as np
import pytest

from dynrag.errors import ConfigError
from dynrag.classify.query import QueryDecision
from dynrag.methods.chain import RetrievalChain
from dynrag.methods.flare import masked_query
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, parse_options
from dynrag.retrieval.bm25 import BM25Index
from tests.fakes import HashEmbedder

QUESTION = "who built the bridge of the town ?"


@pytest.fixture(scope="module")
def builder():
    return PromptBuilder.for_dataset("default", n_exemplars=1)


def run(name, lm, index, builder, **options):
    return build_method(name, lm, index, options, builder).answer(QUESTION)


def test_fixed_length_retrieves_after_every_n_tokens_with_those_tokens(lm, index, builder):
    answer = run("fixed_length", lm, index, builder, n=4, max_new_tokens=20, max_retrievals=10)
    generate_steps = [s for s in answer.trace.steps if s.kind == "generate"]
    assert answer.trace.retrievals, "a 20-token budget in 4-token steps must retrieve"
    for step, retrieval in zip(generate_steps, answer.trace.retrievals):
        assert step.generated_tokens == 4
        assert retrieval.query == " ".join(step.kept_text.split())
    positions = [r.position for r in answer.trace.retrievals]
    assert positions == [4 * (i + 1) for i in range(len(positions))]


def test_max_retrievals_is_a_hard_cap(lm, index, builder):
    answer = run("fixed_length", lm, index, builder, n=2, max_new_tokens=30, max_retrievals=2)
    assert len(answer.trace.retrievals) == 2


def test_flare_retrieves_only_below_theta(lm, index, builder):
    never = run("flare", lm, index, builder, theta=0.0, max_new_tokens=16)
    assert never.trace.retrievals == []
    always = run("flare", lm, index, builder, theta=1.0, max_new_tokens=16, max_retrievals=3)
    tentative = [s for s in always.trace.steps if s.kind == "tentative"]
    assert always.trace.retrievals and len(tentative) == len(always.trace.retrievals)
    for step in tentative:
        assert any(p < 1.0 for p in step.details["probabilities"])


def test_masked_query_drops_low_probability_tokens():
    pieces = [" The", " bridge", " opened", " in", " 1887", "."]
    probs = np.array([0.9, 0.8, 0.2, 0.95, 0.1, 0.99])
    assert masked_query(pieces, probs, 0.5) == "The bridge in."


def test_dragin_threshold_zero_retrieves_with_a_query(lm, index, builder):
    answer = run("dragin", lm, index, builder, theta=0.0, max_new_tokens=24, max_retrievals=2)
    assert answer.trace.retrievals
    assert answer.trace.retrievals[0].query.strip()
    scored = [s for s in answer.trace.steps if "score" in s.details]
    assert scored and scored[0].details["trigger"] is not None
    # The answer is cut before the triggering word: kept text is the words before it.
    first = scored[0]
    words = first.details["words"]
    assert first.kept_text.split() == words[: first.details["trigger"]]


@pytest.mark.parametrize("theta", [0.0, 0.5])
def test_dragin_settled_stop_decides_as_waiting_for_the_sentence_end_with_fewer_tokens(lm, index, builder, theta):
    options = dict(theta=theta, max_new_tokens=40, chunk_tokens=16, max_retrievals=2)
    waiting = run("dragin", lm, index, builder, settled_stop=False, **options)
    settled = run("dragin", lm, index, builder, settled_stop=True, **options)
    assert settled.text == waiting.text
    assert [(r.query, r.position) for r in settled.trace.retrievals] == [
        (r.query, r.position) for r in waiting.trace.retrievals]
    assert settled.trace.generated_tokens <= waiting.trace.generated_tokens
    if theta == 0.0:  # the first content word triggers, settled as soon as the next word starts
        assert waiting.trace.retrievals
        assert settled.trace.generated_tokens < waiting.trace.generated_tokens


def test_dragin_infinite_threshold_answers_like_direct(lm, index, builder):
    dragin = run("dragin", lm, index, builder, theta=1e9, max_new_tokens=24, chunk_tokens=64)
    direct = build_method("direct", lm, None, {"max_new_tokens": 24}, builder).answer(QUESTION)
    assert dragin.trace.retrievals == []
    assert dragin.text == direct.text


def test_dragin_reference_variant_runs(lm, index, builder):
    answer = run("dragin", lm, index, builder, variant="reference", theta=0.0, max_new_tokens=16, max_retrievals=1)
    assert len(answer.trace.retrievals) == 1


@pytest.mark.parametrize("name", ["fixed_length", "fixed_sentence", "flare", "dragin"])
def test_answer_and_trace_serialise(lm, index, builder, name):
    data = run(name, lm, index, builder, max_new_tokens=12).to_dict()
    for key in ("question", "answer", "final_answer", "retrievals", "generated_tokens", "steps"):
        assert key in data
    assert data["generated_tokens"] >= data["kept_tokens"] > 0
    assert data["waste_ratio"] == pytest.approx(data["generated_tokens"] / data["kept_tokens"], abs=1e-4)


def test_unknown_option_lists_valid_ones():
    with pytest.raises(ConfigError) as err:
        parse_options("dragin", {"thetaa": "1"})
    assert "thetaa" in str(err.value) and "theta" in str(err.value) and "query_words" in str(err.value)


def test_bad_option_value_names_the_key():
    with pytest.raises(ConfigError) as err:
        parse_options("dragin", {"variant": "fancy"})
    assert "variant" in str(err.value)


@pytest.mark.parametrize("name", ["fixed_length", "fixed_sentence"])
def test_fixed_methods_can_retrieve_first_with_the_question(lm, index, builder, name):
    answer = run(name, lm, index, builder, first_retrieval=True, max_new_tokens=8, max_retrievals=3)
    first = answer.trace.retrievals[0]
    assert first.query == QUESTION and first.position == 0
    plain = run(name, lm, index, builder, max_new_tokens=8, max_retrievals=3)
    assert all(r.position > 0 for r in plain.trace.retrievals)


# ---- the retrieval chain on every retrieval ---------------------------------------------------


@pytest.mark.parametrize("name, options", [
    ("fixed_length", {"n": 4, "max_new_tokens": 16, "max_retrievals": 3}),
    ("dragin", {"theta": 0.0, "max_new_tokens": 24, "max_retrievals": 2}),
    ("flare", {"theta": 1.0, "max_new_tokens": 16, "max_retrievals": 2}),
])
def test_every_retrieval_goes_through_the_chain(lm, index, builder, name, options):
    plain = run(name, lm, index, builder, **options)
    method = build_method(name, lm, index, {**options, "repack": "reverse", "rerank": "embedding", "k": 2}, builder)
    method.chain = RetrievalChain(lm, index, method.options, embedder=HashEmbedder())
    chained = method.answer(QUESTION)
    assert plain.trace.retrievals and chained.trace.retrievals
    searched = [r for r in chained.trace.retrievals if r.query]
    steps = [s for s in chained.trace.steps if s.kind in ("rerank", "repack")]
    assert [s.kind for s in steps] == ["rerank", "repack"] * len(searched)
    for retrieval, rerank, repack in zip(searched, steps[0::2], steps[1::2]):
        assert "reranked by embedding" in retrieval.reason and "reverse order" in retrieval.reason
        assert [h.id for h in retrieval.hits] == repack.details["ids"] == rerank.details["kept"][::-1]
        assert len(rerank.details["candidates"]) == len(index.search(retrieval.query, 10))


class NoRetrievalNeeded:
    def __init__(self):
        self.asked = []

    def decide(self, question, threshold=0.5):
        self.asked.append(question)
        return QueryDecision(needs_retrieval=False, probability=0.1, threshold=threshold)


@pytest.mark.parametrize("name", ["fixed_length", "fixed_sentence", "flare", "dragin"])
def test_query_classification_decides_once_before_generation(lm, index, builder, name):
    method = build_method(name, lm, index, {"classify": True, "theta": 0.0, "max_new_tokens": 12}
                          if name in ("flare", "dragin") else {"classify": True, "max_new_tokens": 12}, builder)
    classifier = NoRetrievalNeeded()
    method.chain = RetrievalChain(lm, index, method.options, classifier=classifier)
    answer = method.answer(QUESTION)
    assert classifier.asked == [QUESTION]
    assert answer.trace.steps[0].kind == "classify" and answer.trace.retrievals == []
    assert answer.trace.steps[0].details["decision"] == "answer directly"


def test_the_preset_sets_the_chain_of_an_iterative_method():
    options = parse_options("dragin", {"preset": "balanced"})
    assert (options.classify, options.rerank, options.repack, options.compress) == (True, "embedding", "reverse", "extractive")
    assert parse_options("fixed_length", {"preset": "balanced", "repack": "sides"}).repack == "sides"


def test_ask_dragin_with_the_balanced_preset_applies_the_chain_to_each_retrieval(lm, index, tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    import dynrag.cli as cli

    monkeypatch.setattr(cli, "_load_lm_with_status", lambda spec: lm)
    load = BM25Index.load.__func__  # numpy search: numba's JIT would cost seconds here
    monkeypatch.setattr(BM25Index, "load", classmethod(lambda cls, d, *a, **k: load(cls, d, *a, **{**k, "backend": "numpy"})))
    index_dir = tmp_path / "idx"
    BM25Index.build([index.passage(i) for i in range(len(index))], index_dir, progress=False)
    # the classifier's "answer directly" would leave nothing to check: keep it, but below its threshold
    args = ["ask", QUESTION, "--corpus", str(index_dir), "--method", "dragin", "--preset", "balanced",
            "--option", "theta=0", "--option", "max_new_tokens=16", "--option", "classify_threshold=0", "--json"]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["options"]["preset"] == "balanced" and data["options"]["rerank"] == "embedding"
    kinds = [s["kind"] for s in data["steps"]]
    assert kinds[0] == "classify" and kinds.count("classify") == 1
    assert data["retrievals"] and kinds.count("rerank") == kinds.count("compress") == len(data["retrievals"])
    assert all("reranked by embedding" in r["reason"] for r in data["retrievals"])
    assert (index_dir / "dense" / "vectors.npy").is_file()  # the preset's hybrid retriever


@pytest.mark.parametrize("name,options", [("fixed_length", {"n": 4}), ("flare", {"theta": 1.0}),
                                          ("dragin", {"theta": 0.0})])
def test_the_last_finished_sentence_as_every_methods_query(lm, index, builder, name, options):
    """DRAGIN's Table 4 gives every method one query form: the question until a sentence is finished,
    then the last finished sentence of the answer."""
    answer = run(name, lm, index, builder, query="previous_sentence", max_new_tokens=32, max_retrievals=4, **options)
    assert answer.trace.retrievals
    written = " ".join(answer.text.split())
    for retrieval in answer.trace.retrievals:
        assert retrieval.query == " ".join(QUESTION.split()) or (
            retrieval.query in written and retrieval.query[-1] in ".!?")


def test_an_answer_that_spends_the_decoding_budget_is_cut_and_marked(lm, index, builder):
    """FLARE retrieving at every tentative sentence throws each draft away and decodes it again:
    with a small decoding budget the loop stops there, says so in the trace, and decodes no more."""
    free = run("flare", lm, index, builder, theta=1.0, max_new_tokens=16, max_retrievals=5)
    assert free.trace.cut is None and "cut" not in free.to_dict()
    assert free.trace.generated_tokens > 12  # what the budget below must stop short of
    cut = run("flare", lm, index, builder, theta=1.0, max_new_tokens=16, max_retrievals=5, max_generated_tokens=12)
    loop = [s for s in cut.trace.steps if s.kind != "finish"]
    spent = sum(s.generated_tokens for s in loop)
    assert 12 <= spent <= 13  # a call decodes at least one token: a regenerated sentence may add it
    assert cut.trace.cut == f"cut after {spent} decoded tokens (max_generated_tokens 12)"
    assert cut.to_dict()["cut"] == cut.trace.cut and cut.final_answer is not None


def test_the_decoding_budget_defaults_to_four_times_the_answer_budget(lm, index, builder):
    method = build_method("fixed_length", lm, index, {"n": 4, "max_new_tokens": 10}, builder)
    assert method.decoding_budget() == 40
    with pytest.raises(ConfigError, match="max_generated_tokens"):
        parse_options("flare", {"max_generated_tokens": 0})
