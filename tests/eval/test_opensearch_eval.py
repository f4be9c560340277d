"""`dynrag eval` and `dynrag eval-retrieval` searching an OpenSearch index on a real osmem-server
(`--retriever opensearch --retriever-option url=...,index=...`, no --corpus)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.errors import ConfigError
from dynrag.eval.pool import pool_contexts
from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import run_eval
from tests.eval.fixtures import eval_plan
from dynrag.eval.steps import load_questions
from dynrag.retrieval.opensearch_ingest import build_opensearch_index
from tests.eval import fixtures as fx
from tests.fakes import FakeMethodFactory

cli = CliRunner()


@pytest.fixture(scope="module")
def qa(opensearch_url, tmp_path_factory):
    """Questions whose pooled context paragraphs fill index 'qa' (eval-retrieval matches gold by id)."""
    tmp = tmp_path_factory.mktemp("qa")
    rows = fx.qa_rows(6)
    data = fx.write_jsonl(tmp / "qa.jsonl", rows)
    from rich.console import Console

    examples, _ = load_questions("jsonl", data, Console(quiet=True))
    passages = list(pool_contexts(examples))
    build_opensearch_index(passages, opensearch_url, "qa", replace=True, progress=False)
    return rows, data, {p.id for p in passages}


def test_eval_searches_the_server_and_records_its_corpus(opensearch_url, qa, tmp_path):
    rows, data, ids = qa
    req = eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", retriever="opensearch",
                      retriever_options={"url": opensearch_url, "index": "qa"})
    summary = run_eval(req, method_factory=FakeMethodFactory({r["question"]: r["answers"][0] for r in rows}),
                       progress=False)
    assert summary["n"] == 6 and summary["support_recall"] == 1.0 and summary["em"] == 1.0
    preds = read_predictions(tmp_path / "run")
    assert all(p["retrieved_ids"] and set(p["retrieved_ids"]) <= ids for p in preds)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["retriever"], config["corpus"]) == ("opensearch", None) and len(config["corpus_sha256"]) == 64
    assert not (tmp_path / "run" / "contexts-index").exists()
    with pytest.raises(ConfigError, match="searches its server's index; drop --corpus"):
        run_eval(eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "other", corpus="contexts",
                             retriever="opensearch", retriever_options={"url": opensearch_url, "index": "qa"}),
                 method_factory=FakeMethodFactory(), progress=False)


def test_eval_retrieval_cli_with_one_retriever_option_flag(opensearch_url, qa, tmp_path):
    rows, data, _ = qa
    r = cli.invoke(app, ["eval-retrieval", "--dataset", "jsonl", "--data", str(data), "--retriever", "opensearch",
                         "--option", f"url={opensearch_url},index=qa", "--out", str(tmp_path / "r"), "--no-progress"])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["n"] == 6 and summary["recall@10"] == 1.0 and summary["corpus"] is None
    assert summary["options"] == {"url": opensearch_url, "index": "qa"}
