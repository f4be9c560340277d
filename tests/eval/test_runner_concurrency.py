"""`eval --concurrency N`: questions in flight at once, each result written once, resume-safe.

The method is a fast stand-in that searches the real BM25 index from several threads; the real
HTTP model is in tests/lm/test_openai_llamacpp.py.
"""

import threading
import time

import pytest

from dynrag.errors import ConfigError
from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import run_eval
from tests.eval.fixtures import eval_plan
from tests.eval import fixtures as fx
from tests.fakes import FakeMethod
from tests.waiting import HANG_GUARD_S


class Concurrent(FakeMethod):
    """Answers after a delay that varies by question, so answers finish out of order; counts how
    many are in flight at once; may fail on one question. The first answer waits until a second
    question is in flight, so "more than one at once" holds by construction, not by timing."""

    def __init__(self, retriever, fail_on: str | None = None):
        super().__init__(retriever)
        self.fail_on = fail_on
        self.lock = threading.Lock()
        self.active = 0
        self.most_active = 0
        self.overlapped = threading.Event()
        self.first_claimed = False

    def answer(self, question):
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
            if self.active > 1:
                self.overlapped.set()
            first, self.first_claimed = not self.first_claimed, True
        try:
            if first:
                assert self.overlapped.wait(HANG_GUARD_S), "no second question was ever in flight"
            time.sleep(0.02 * (len(question) % 5))
            if question == self.fail_on:
                raise RuntimeError("the model server went away")
            return super().answer(question)
        finally:
            with self.lock:
                self.active -= 1


def run(tmp_path, data, method, concurrency, **kw):
    req = eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts",
                      concurrency=concurrency, **kw)
    return run_eval(req, method_factory=lambda config, retriever: method.bind(retriever), progress=False)


class Holder:
    def __init__(self, **kw):
        self.kw, self.method = kw, None

    def bind(self, retriever):
        self.method = Concurrent(retriever, **self.kw)
        return self.method


def test_answers_are_written_once_each_with_several_in_flight(tmp_path):
    rows = fx.qa_rows(12)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    holder = Holder()
    summary = run(tmp_path, data, holder, concurrency=4)
    ids = [p["id"] for p in read_predictions(tmp_path / "run")]
    assert sorted(ids) == sorted(r["id"] for r in rows) and len(ids) == len(set(ids))
    assert 1 < holder.method.most_active <= 4
    assert summary["n"] == 12
    assert all(p["retrieved_ids"] for p in read_predictions(tmp_path / "run"))  # the index answered every thread


def test_a_failed_run_resumes_without_redoing_or_duplicating(tmp_path):
    rows = fx.qa_rows(12)
    data = fx.write_jsonl(tmp_path / "qa.jsonl", rows)
    failing = Holder(fail_on=rows[7]["question"])
    with pytest.raises(RuntimeError, match="went away"):
        run(tmp_path, data, failing, concurrency=3)
    first = [p["id"] for p in read_predictions(tmp_path / "run")]
    assert rows[7]["id"] not in first and len(first) == len(set(first)) and len(first) < 12
    again = Holder()
    run(tmp_path, data, again, concurrency=3)
    ids = [p["id"] for p in read_predictions(tmp_path / "run")]
    assert sorted(ids) == sorted(r["id"] for r in rows) and len(ids) == len(set(ids))
    assert set(again.method.calls) == {r["question"] for r in rows if r["id"] not in first}


def test_concurrency_needs_a_model_behind_http(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    req = eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts",
                      concurrency=2)
    with pytest.raises(ConfigError, match="--concurrency 2 needs a model behind an HTTP server.*openai:"):
        run_eval(req, progress=False)
    with pytest.raises(ConfigError, match="at least 1"):
        eval_plan(dataset="jsonl", data=data, method="single", out=tmp_path / "run", corpus="contexts", concurrency=0)
