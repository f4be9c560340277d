"""`dynrag eval` end to end with the real bundled model (slow: about a minute on a 2-core CPU)."""

import json

import pytest
from typer.testing import CliRunner

from dynrag.cli import app
from dynrag.eval.summary import METRIC_KEYS
from tests.eval import fixtures as fx


@pytest.mark.slow
def test_eval_single_with_bundled_model_over_pooled_contexts(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(3))
    out = tmp_path / "run"
    args = ["eval", "--dataset", "jsonl", "--data", str(data), "--method", "single", "--corpus", "contexts",
            "--model", "bundled:smollm2", "--option", "max_new_tokens=32", "--out", str(out)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert {p.name for p in out.iterdir()} >= {"config.json", "predictions.jsonl", "summary.json", "summary.md", "contexts-index"}
    config = json.loads((out / "config.json").read_text())
    assert config["model"] == "bundled:smollm2" and config["method"] == "single"
    preds = [json.loads(l) for l in (out / "predictions.jsonl").read_text().splitlines()]
    assert sorted(p["id"] for p in preds) == ["q0", "q1", "q2"]  # --workers auto: in the order they finish
    for p in preds:
        assert p["retrievals"] == 1 and p["generated_tokens"] > 0 and p["prediction"]
        assert p["support_found"] == p["support"]  # the question names its mill: BM25 finds it
    summary = json.loads((out / "summary.json").read_text())
    assert set(METRIC_KEYS) <= set(summary) and summary["n"] == 3 and summary["model"] == "bundled:smollm2"
    # resuming a finished run answers nothing and loads no model
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and len((out / "predictions.jsonl").read_text().splitlines()) == 3
