"""`eval --batch N`: questions in flight in one process over one batching model; the same
predictions as one at a time, each written once, resume-safe; bad combinations refused."""

import pytest

from dynrag.errors import ConfigError
from dynrag.io.rundir import read_predictions
from dynrag.eval.runner import run_eval
from tests.eval import fixtures as fx
from tests.eval.fixtures import eval_plan
from tests.tiny_models import save_tiny_llama


def predictions(out):
    return {r["id"]: (r["prediction"], r["retrievals"], r["generated_tokens"]) for r in read_predictions(out)}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return f"hf:{save_tiny_llama(tmp_path_factory.mktemp('tiny'))}"


@pytest.mark.parametrize("method", ["single", "flare"])
def test_batched_eval_writes_the_predictions_of_one_at_a_time(tmp_path, tiny_model, method):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(6))
    common = dict(dataset="jsonl", data=data, method=method, corpus="contexts", model=tiny_model,
                  options={"max_new_tokens": 12})
    run_eval(eval_plan(out=tmp_path / "one", **common), progress=False)
    run_eval(eval_plan(out=tmp_path / "many", batch=4, **common), progress=False)
    # Resume-safe: with three answers lost (as after a kill), a rerun asks exactly those again.
    lines = (tmp_path / "many" / "predictions.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "many" / "predictions.jsonl").write_text("".join(lines[:3]))
    summary = run_eval(eval_plan(out=tmp_path / "many", batch=4, **common), progress=False)
    assert summary["n"] == 6
    records = read_predictions(tmp_path / "many")
    assert len(records) == len({r["id"] for r in records}) == 6
    assert predictions(tmp_path / "many") == predictions(tmp_path / "one")


@pytest.mark.slow  # spawns two worker processes, each importing torch
def test_worker_processes_each_batching_write_the_predictions_of_one_at_a_time(tmp_path, tiny_model):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(7))
    common = dict(dataset="jsonl", data=data, method="flare", corpus="contexts", model=tiny_model,
                  options={"max_new_tokens": 12})
    run_eval(eval_plan(out=tmp_path / "one", **common), progress=False)
    summary = run_eval(eval_plan(out=tmp_path / "many", workers=2, batch=3, **common), progress=False)
    assert summary["n"] == 7
    records = read_predictions(tmp_path / "many")
    assert len(records) == len({r["id"] for r in records}) == 7
    assert predictions(tmp_path / "many") == predictions(tmp_path / "one")


def test_batch_refuses_other_executors_and_server_models(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    common = dict(dataset="jsonl", data=data, method="direct", out=tmp_path / "run")
    with pytest.raises(ConfigError, match="--batch and --dask"):
        eval_plan(batch=2, dask="tcp://127.0.0.1:1", **common)
    with pytest.raises(ConfigError, match="--batch must be a number >= 1"):
        eval_plan(batch=0, **common)
    plan = eval_plan(batch=3, model="openai:http://127.0.0.1:9/v1#m", **common)
    with pytest.raises(ConfigError, match="use --concurrency 3 instead"):
        run_eval(plan, progress=False)
    assert not (tmp_path / "run").exists()  # refused before the run directory was made
