"""Every prompt fits the model's context window; passages are cut to a token budget and the trace
says so; a question has a length limit.

Before: nothing bounded a prompt. A 5 MB passage went whole into the prompt (`ask` tried to
allocate 510 GB and died), and a 100,000-character question decoded for over 15 minutes. Here the
tiny real model (tests/tiny_models.py) stands in, its context window made small.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError, DynragError
from dynrag.lm.hf import HFLanguageModel
from dynrag.methods.budget import MAX_QUESTION_CHARS, PROMPT_MARGIN, share_out, squeeze, truncate_to_tokens
from dynrag.methods.prompting import PromptBuilder
from dynrag.methods.registry import build_method
from dynrag.retrieval.base import Hit
from tests.cli_inprocess import run_in_process
from tests.fakes import FakeRetriever
from tests.tiny_models import WORDS, RecordingTinyLM, save_tiny_llama, tiny_llama, tiny_tokenizer
from tests.waiting import HANG_GUARD_S

QUESTION = "who built the bridge of the town ?"
HUGE = " ".join((WORDS * (1_000_000 // len(WORDS) + 1))[:1_000_000])  # ~5 MB, a million tokens
SMALL = Hit("small", "Bridge", "the old bridge of the town was built in 1887 by an engineer", 2.0)
BIG = Hit("big", "Everything", HUGE, 1.0)


def test_share_out_and_truncate_by_hand():
    assert share_out([10, None, 30], 100) == [10, 60, 30]  # short parts whole, the long one the rest
    assert share_out([80, 90], 100) == [50, 50]
    assert share_out([], 10) == []
    words = lambda text: len(text.split())  # noqa: E731 - a one-word-one-token counter
    cut, n = truncate_to_tokens("a b c d e f g h", 3, words)
    assert n <= 3 and cut == " ".join("a b c d e f g h".split()[:n])


def test_squeeze_by_hand():
    text = "  the   old\nbridge \t of  town  "
    assert squeeze(text) == "the old bridge of town"
    assert [squeeze(text, n) for n in (0, 3, 4, 9, 12, 100)] == ["", "the", "the ", "the old b", "the old brid",
                                                                "the old bridge of town"]
    words = "a" + " " * 50 + "b c"  # a run of spaces longer than the first piece split: read on
    assert squeeze(words, 3) == "a b" and squeeze(words, 5) == "a b c"


def test_a_prompt_that_fits_is_left_alone_and_costs_no_tokenisation():
    lm = RecordingTinyLM(window=8192)
    builder = PromptBuilder.for_dataset("default")
    prompt = builder.build(QUESTION, [SMALL], lm=lm, max_new_tokens=64)
    assert prompt.text == builder.build(QUESTION, [SMALL]).text and prompt.truncated == []
    assert lm.counted == []  # no count_tokens call: an HTTP backend is not asked either


def test_a_huge_passage_is_cut_to_fit_the_window_and_the_cut_is_recorded():
    lm = RecordingTinyLM(window=700)
    builder = PromptBuilder.for_dataset("default", n_exemplars=2)
    prompt = builder.build(QUESTION, [SMALL, BIG], lm=lm, max_new_tokens=48)
    tokens = len(lm.tokenizer(prompt.text).input_ids)  # with the BOS token, as generate sees it
    assert tokens + 48 <= 700
    assert SMALL.text in prompt.text  # the short passage is whole
    assert "[2] Everything: the a of" in prompt.text and prompt.text.count(" …") == 1
    [note] = [n for n in prompt.truncated if n["part"] == "document"]
    assert note["id"] == "big" and note["chars"] == len(HUGE) and 0 < note["kept_tokens"] < 700
    assert max(lm.counted) < 700 * 9  # never tokenised the 5 MB text itself


def test_exemplars_give_way_to_documents_then_a_too_long_question_is_an_error():
    lm = RecordingTinyLM(window=300)
    builder = PromptBuilder.for_dataset("default", n_exemplars=6)
    prompt = builder.build(QUESTION, [SMALL, BIG], lm=lm, max_new_tokens=32)
    assert len(lm.tokenizer(prompt.text).input_ids) + 32 <= 300
    [kept] = [n for n in prompt.truncated if n["part"] == "exemplars"]
    assert kept["kept"] < 6 and kept["of"] == 6
    with pytest.raises(ConfigError, match="context window of 40 tokens"):
        builder.build(" ".join(["bridge"] * 60), None, lm=RecordingTinyLM(window=40), max_new_tokens=8)


@pytest.mark.parametrize("method", ["single", "fixed_length", "fixed_sentence", "flare", "dragin"])
def test_every_prompt_of_every_method_fits_and_the_trace_says_what_was_cut(method):
    lm = RecordingTinyLM(window=600)
    retriever = FakeRetriever([BIG, SMALL])
    options = {"max_new_tokens": 24, "k": 2}
    if method in ("fixed_length",):
        options["n"] = 6
    answer = build_method(method, lm, retriever, options, PromptBuilder.for_dataset("default", n_exemplars=1))
    answer = answer.answer(QUESTION)
    assert lm.prompts, "the method generated nothing"
    for prompt_tokens, new in lm.prompts:
        assert prompt_tokens + new <= 600 - PROMPT_MARGIN + 1, lm.prompts
    trace = answer.to_dict()
    if method in ("single", "fixed_length"):  # these retrieve here; the others may not
        assert trace["retrievals"]
    if trace["retrievals"]:
        assert any(n["part"] == "document" and n["id"] == "big" for n in trace["truncations"]), trace["truncations"]
        assert json.loads(json.dumps(trace))["truncations"]  # plain JSON in --trace and predictions


def test_a_question_over_the_limit_is_a_clear_error():
    long_question = "who " * (MAX_QUESTION_CHARS // 4 + 10)
    with pytest.raises(DynragError, match=f"over the limit of {MAX_QUESTION_CHARS:,}"):
        build_method("direct", RecordingTinyLM(window=600), None, {}).answer(long_question)


def test_cli_ask_refuses_a_100k_character_question_before_loading_anything(tmp_path):
    r = run_in_process("ask", "why " * 25_000, "--method", "direct")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "99,999 characters long" in r.stderr and "loading model" not in r.stderr


def test_eval_refuses_a_dataset_question_over_the_limit_before_writing(tmp_path):
    from tests.eval import fixtures as fx

    rows = fx.qa_rows(2)
    rows[1]["question"] = "why " * 2000
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    r = run_in_process("eval", "--dataset", "jsonl", "--data", data, "--method", "direct", "--out", tmp_path / "run")
    assert r.returncode == 1 and f"{data}: question 'q1'" in r.stderr.replace("\n", "")
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # indexes a 5 MB passage and answers over it with the tiny model, in subprocesses
def test_cli_index_warns_about_a_huge_passage_and_ask_answers_over_it(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "big", "title": "Everything", "text": HUGE}) + "\n"
                      + json.dumps({"id": "small", "title": "Bridge", "text": SMALL.text}) + "\n")
    dynrag = [sys.executable, "-m", "dynrag.cli"]
    r = subprocess.run([*dynrag, "index", str(corpus), "--out", str(tmp_path / "idx")], capture_output=True,
                       text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    said = " ".join(r.stderr.split())
    assert "warning:" in said and "'big'" in said and "--chunk tokens:100:20" in said
    r = subprocess.run([*dynrag, "index", str(corpus), "--out", str(tmp_path / "chunked"), "--chunk", "tokens:100:20"],
                       capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0 and "warning:" not in r.stderr

    model = save_tiny_llama(tmp_path / "tiny")  # a context window of 4,096 tokens
    r = subprocess.run([*dynrag, "ask", "the river town bridge ?", "--corpus", str(tmp_path / "idx"), "--model",
                        f"hf:{model}", "--option", "k=2", "--option", "max_new_tokens=8", "--json"],
                       capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    trace = json.loads(r.stdout)
    assert [n["id"] for n in trace["truncations"] if n["part"] == "document"] == ["big"]
    r = subprocess.run([*dynrag, "ask", "the river town bridge ?", "--corpus", str(tmp_path / "idx"), "--model",
                        f"hf:{model}", "--option", "k=2", "--option", "max_new_tokens=8"],
                       capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0 and "passage 'big' cut to" in " ".join(r.stdout.split())


def test_hf_models_report_their_window():
    tok = tiny_tokenizer()
    lm = HFLanguageModel(tiny_llama(len(tok)), tok, name="tiny")
    assert lm.context_window == 4096
    assert Passage  # the record type the index stores


def test_the_chain_steps_that_run_the_model_on_passages_stay_within_the_window():
    """rerank=lm scores a prompt per passage, compress=selective one pass over the passages."""
    from dynrag.context.compress import SelectiveContextCompressor, sentence_units
    from dynrag.rerank.lm_pointwise import LMPointwiseReranker

    lm = RecordingTinyLM(window=128)
    reranker = LMPointwiseReranker(lm, yes=(" the",), no=(" a",))  # words the tiny vocabulary has
    assert len(lm.tokenizer(reranker.prompt(QUESTION, BIG)).input_ids) <= 128
    reranker.rerank(QUESTION, [SMALL, BIG], 2)

    seen = []
    real = lm.text_logprobs
    lm.text_logprobs = lambda text: (seen.append(len(lm.tokenizer(text).input_ids)), real(text))[1]
    hits = [SMALL, Hit("big", "", ". ".join(["the bridge of the town"] * 300), 1.0)]
    compressor = SelectiveContextCompressor(lm)
    scores = compressor.scores(QUESTION, hits, sentence_units(hits))
    assert seen and max(seen) <= 128 and len(scores) == len(sentence_units(hits))
