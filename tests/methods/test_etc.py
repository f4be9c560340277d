"""ETC end to end on a scripted model (entropies chosen per word) and on a tiny random transformers model."""

import pytest

from dynrag.errors import ConfigError
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method, method_traits
from tests.methods.sentence_lm import NamedPassages, SentenceLM

QUESTION = "Who built the bridges of Lyon?"
# Entropies 1, 2, 2.5, 2.5, 6 over five content words: d1 = 0, 1, .5, 0, 3.5 and d2 = 0, 0, -.5,
# -.5, 3 (word 4 against word 2, the latest nonzero d1). Smoothed: -.5, -.5 (both distances 0), then
# at word 4 E = 2/3, w = (7/6) / (7/3 + 7/6) = 1/3, a = 14/15, m = 14/15 * 3 - 1/15 * .5 = 2.7667.
RISING = ("Alpha built stone bridges Lyon. Then more words follow here.", [1, 2, 2.5, 2.5, 6, 1, 1, 1, 1, 1])


def answer(turns, **options):
    lm = SentenceLM(turns)
    retriever = NamedPassages({}, default=["p1", "p2"])
    method = build_method("etc", lm, retriever, {"k": 2, **options}, PromptBuilder.for_dataset("default", 1))
    return method.answer(QUESTION), lm, retriever


def test_a_sharp_rise_cuts_before_the_word_and_searches_with_the_context():
    result, lm, retriever = answer([RISING, " Lyon. So the answer is Alpha."])
    assert retriever.queries == [f"{QUESTION} Alpha built stone bridges"]  # query=full_context
    (retrieval,) = result.trace.retrievals
    assert retrieval.reason.startswith("entropy trend 2.77 > 1.3 at 'Lyon.'")
    first = result.trace.steps[0]
    assert first.kept_text == "Alpha built stone bridges" and first.details["trigger"] == 4
    assert first.details["scores"][2:5] == pytest.approx([-0.5, -0.5, 2.7667], abs=1e-4)
    # decoding stopped once "Lyon." was finished (the next word had begun): 6 of 10 words decoded
    assert first.generated_tokens == 6 and lm.decoded == 6 + 6
    # the next call sees the documents; its first sentence is not checked, and the answer is complete
    assert "about p1" in lm.documents(1) and lm.documents(0) == ""
    assert result.text == "Alpha built stone bridges Lyon. So the answer is Alpha." and result.final_answer == "Alpha"


def test_a_level_without_a_rise_never_triggers_and_a_lower_theta_or_abs_does():
    flat = ("Alpha built stone bridges Lyon. So the answer is Alpha.", [3.0] * 10)
    result, _, retriever = answer([flat])
    assert retriever.queries == [] and result.final_answer == "Alpha"  # high entropy, but flat: no trend
    # the mirror image of RISING: d2 = 0, 0, .5, .5, -3, smoothed down to -2.7667 at "Lyon."
    falling = ("Alpha built stone bridges Lyon.", [6, 5, 4.5, 4.5, 1])
    result, _, retriever = answer([falling, " So the answer is Alpha."])
    assert retriever.queries == [] and result.trace.steps[0].details["trigger"] is None
    result, _, retriever = answer([falling, " Lyon. So the answer is Alpha."], absolute=True)
    assert len(retriever.queries) == 1 and result.trace.retrievals[0].reason.startswith("entropy trend -2.77")


def test_the_query_forms_and_the_authors_one_sentence_documents():
    _, _, retriever = answer([RISING, " Lyon. So the answer is Alpha."], query="last_words", query_words=3)
    assert retriever.queries == ["built stone bridges"]
    result, lm, _ = answer([RISING, " Lyon.", " So the answer is Alpha."], documents="sentence")
    assert [s.details.get("with_documents", False) for s in result.trace.steps][:2] == [False, True]
    assert "about p1" in lm.documents(1) and lm.documents(2) == ""  # one sentence with them, then none


def test_runs_without_attention_and_asks_for_it_only_with_the_attention_weight():
    assert not method_traits("etc").needs_attention
    with pytest.raises(ConfigError, match="weight=attention needs last-layer attention"):
        answer([RISING], weight="attention")


def test_on_a_tiny_transformers_model_with_both_weights(lm, index):
    builder = PromptBuilder.for_dataset("default", 1)
    for weight in ("none", "attention"):
        method = build_method("etc", lm, index, {"theta": 0.0, "weight": weight, "max_new_tokens": 24,
                                                 "max_retrievals": 1}, builder)
        result = method.answer("who built the bridge of the town ?")
        scored = [s for s in result.trace.steps if "scores" in s.details]
        assert scored and all(len(s.details["scores"]) == len(s.details["words"]) for s in scored)
        if result.trace.retrievals:
            trigger = next(s for s in scored if s.details["trigger"] is not None)
            assert trigger.details["scores"][trigger.details["trigger"]] > 0.0
            assert result.trace.retrievals[0].query.startswith("who built the bridge")


def test_the_default_tune_space_is_valid_for_the_options():
    from dynrag.methods.etc import Etc
    from dynrag.tune.space import parse_param

    (theta,) = [parse_param(spec, Etc.Options, None, "etc", None) for spec in Etc.traits.tune_space]
    assert (theta.name, theta.kind, theta.low) == ("theta", "float", 0.2)


@pytest.mark.slow
def test_etc_and_ircot_run_on_the_llama_cpp_backend(tmp_path):
    """Entropies are all ETC reads, so the in-process GGUF backend runs it (and IRCoT, text only)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (make test builds it)")
    from dynrag.corpus import read_passages
    from dynrag.data import demo_passages_path, load_demo_questions
    from dynrag.lm import load_lm
    from dynrag.retrieval.bm25 import BM25Index

    lm = load_lm("bundled:smollm2?backend=llama.cpp", progress=False)
    BM25Index.build(read_passages(demo_passages_path()), tmp_path / "index", progress=False)
    index = BM25Index.load(tmp_path / "index")
    question = load_demo_questions()[0].question
    builder = PromptBuilder.for_dataset("default")
    etc = build_method("etc", lm, index, {"theta": 0.0, "max_retrievals": 2, "max_new_tokens": 48}, builder).answer(question)
    assert etc.trace.retrievals and etc.final_answer.strip()
    trigger = next(s for s in etc.trace.steps if s.details.get("trigger") is not None)
    assert trigger.details["scores"][trigger.details["trigger"]] > 0.0
    ircot = build_method("ircot", lm, index, {"max_new_tokens": 48}, builder).answer(question)
    assert ircot.trace.retrievals[0].query == question and ircot.final_answer.strip()
