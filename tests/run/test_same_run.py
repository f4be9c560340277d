"""`ask`, `serve` and `eval` plan and build the same run from the same --config: a preset's
hybrid retriever in all three, with the same options, chain settings and method."""

import io

import pytest
import yaml
from rich.console import Console

import dynrag.lm
from dynrag.config import load_run_config
from dynrag.corpus.passage import Passage
from dynrag.eval.worker import WorkerJob
from dynrag.eval.runner import default_method_factory, eval_config
from dynrag.retrieval.bm25 import BM25Index
from dynrag.retrieval.hybrid import HybridRetriever
from dynrag.run.assemble import assemble
from dynrag.run.plan import make_plan
from dynrag.serve.cli import build_app
from dynrag.serve.limits import ServeSettings
from tests.eval import fixtures as fx
from tests.tiny_models import tiny_llama_lm

PASSAGES = ["the old bridge of the town was built in 1887", "the river rhone flows south through lyon",
            "the museum of the harbour town opened in the new year"]


@pytest.fixture
def run_config(tmp_path, monkeypatch):
    tiny = tiny_llama_lm(seed=3)
    monkeypatch.setattr(dynrag.lm, "load_lm", lambda spec, progress=True: tiny)
    index = tmp_path / "index"
    BM25Index.build([Passage(f"p{i}", f"t{i}", t) for i, t in enumerate(PASSAGES)], index, progress=False)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({
        "method": "single", "options": {"preset": "balanced", "max_new_tokens": 8}, "retriever_options": {"alpha": 0.5},
        "index": str(index), "corpus": str(index), "dataset": "jsonl", "data": str(data), "out": str(tmp_path / "run"),
        "workers": 1,
    }))
    return load_run_config(path, {}), index, tmp_path


def identity(plan):
    r = plan.retriever
    return (str(plan.model), plan.method, plan.exemplars, r.name, r.options, r.index)


def test_ask_serve_and_eval_give_the_same_plan_and_build_the_same_parts(run_config):
    run, index, tmp_path = run_config
    plans = {command: make_plan(run, command=command) for command in ("ask", "serve", "eval")}
    assert identity(plans["ask"]) == identity(plans["serve"]) == identity(plans["eval"])
    assert plans["ask"].retriever.name == "hybrid" and plans["ask"].method.options.preset == "balanced"

    asked = assemble(plans["ask"])
    engine = build_app(ServeSettings(), run, Console(file=io.StringIO())).app.state.engine  # inside the guard
    name, options, _ = engine.validate(None, {}, "q?", max_tokens=None, ceiling=10_000, max_question_chars=1000)
    served = engine.method(name, options)
    job = WorkerJob(eval_config(plans["eval"]), str(index), str(tmp_path / "run"), default_method_factory)
    evaluated = job.build()

    retrievers = [asked.retriever, engine.retriever, evaluated.retriever]
    assert all(isinstance(r, HybridRetriever) for r in retrievers)
    assert {(r.alpha, r.fusion, r.candidates) for r in retrievers} == {(0.5, "minmax", 50)}
    methods = [asked.method, served, evaluated]
    assert {type(m).__name__ for m in methods} == {"Single"}
    assert all(m.options == asked.method.options for m in methods)
    assert all(m.chain.options == asked.method.chain.options for m in methods)
