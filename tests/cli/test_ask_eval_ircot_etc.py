"""`dynrag ask` and `dynrag eval` with --method ircot and --method etc, on a tiny saved transformers
model and a real BM25 index, through the real CLI (in process)."""

import json

import pytest

from dynrag.corpus.passage import Passage
from dynrag.retrieval.bm25 import BM25Index
from tests.cli_inprocess import run_in_process as dynrag
from tests.tiny_models import save_tiny_llama

QUESTION = "Who built the old bridge of the town?"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return save_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-index") / "index"
    texts = ["the old bridge of the town was built in 1887", "the river flows south", "the school was founded in paris"]
    BM25Index.build([Passage(f"p{i}", f"title {i}", t) for i, t in enumerate(texts)], out, progress=False)
    return out


@pytest.mark.parametrize("method, options", [("ircot", ["max_paragraphs=4"]), ("etc", ["theta=0.0"])])
def test_ask_prints_the_trace_of_the_method(method, options, model, index):
    flags = [flag for option in ["max_new_tokens=8", *options] for flag in ("--option", option)]
    r = dynrag("ask", QUESTION, "--corpus", index, "--model", f"hf:{model}", "--method", method, *flags, "--json")
    assert r.returncode == 0, r.stderr
    trace = json.loads(r.stdout)
    assert trace["method"] == method and trace["options"]["max_new_tokens"] == 8
    if method == "ircot":  # the first search is the question's, always
        assert trace["retrievals"][0]["query"] == QUESTION
    for retrieval in trace["retrievals"]:
        assert retrieval["query"].strip()


@pytest.mark.slow  # an eval run starts its worker processes: tens of seconds on two cores
@pytest.mark.parametrize("method", ["ircot", "etc"])
def test_eval_runs_the_method_over_the_questions_contexts(method, model, tmp_path):
    data = tmp_path / "qa.jsonl"
    rows = [{"id": f"q{i}", "question": QUESTION, "answers": ["an engineer"],
             "contexts": [{"title": "Bridge", "text": "The old bridge was built by an engineer.", "supporting": True}]}
            for i in range(2)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "run"
    r = dynrag("eval", "--dataset", "jsonl", "--data", data, "--method", method, "--corpus", "contexts",
               "--model", f"hf:{model}", "--option", "max_new_tokens=6", "--out", out)
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 2
    records = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {record["id"] for record in records} == {"q0", "q1"}
